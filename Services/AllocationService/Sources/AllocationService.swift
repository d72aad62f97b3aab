import Foundation
import Hummingbird
import ServiceKit

/// Rider availability and task offers (RDR-010, RDR-020).
package enum AllocationService: ServiceDefinition {
    package static let name = "allocation-service"
    package static let defaultPort = 8083
    package static let defaultSchema = "allocation"

    package static func migrations() throws -> MigrationSet {
        try MigrationSet(component: name, bundle: .module)
    }

    package static func makeApplication(platform: ServicePlatform, environment: ServiceEnvironment) async throws
        -> ServiceApplication
    {
        platform.makeApplication(router: platform.makeRouter())
    }
}
