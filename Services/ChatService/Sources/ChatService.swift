import Foundation
import Hummingbird
import ServiceKit

/// Customer and rider chat for an active order (CUS-032).
package enum ChatService: ServiceDefinition {
    package static let name = "chat-service"
    package static let defaultPort = 8082
    package static let defaultSchema = "chat"

    package static func migrations() throws -> MigrationSet {
        try MigrationSet(component: name, bundle: .module)
    }

    package static func makeApplication(platform: ServicePlatform, environment: ServiceEnvironment) async throws
        -> ServiceApplication
    {
        platform.makeApplication(router: platform.makeRouter())
    }
}
