import Foundation
import Hummingbird
import ServiceKit

/// Live courier location and ETA for deliveries and technician visits (US-072).
package enum LocationService: ServiceDefinition {
    package static let name = "location-service"
    package static let defaultPort = 8084
    package static let defaultSchema = "location"

    package static func migrations() throws -> MigrationSet {
        try MigrationSet(component: name, bundle: .module)
    }

    package static func makeApplication(platform: ServicePlatform, environment: ServiceEnvironment) async throws
        -> ServiceApplication
    {
        platform.makeApplication(router: platform.makeRouter())
    }
}
