import Foundation
import Hummingbird
import ServiceKit

/// Orders and service requests: lifecycle, the pickup saga, the order event log.
package enum OrderService: ServiceDefinition {
    package static let name = "order-service"
    package static let defaultPort = 8081
    package static let defaultSchema = "orders"

    package static func migrations() throws -> MigrationSet {
        try MigrationSet(component: name, bundle: .module)
    }

    package static func makeApplication(platform: ServicePlatform, environment: ServiceEnvironment) async throws
        -> ServiceApplication
    {
        platform.makeApplication(router: platform.makeRouter())
    }
}
