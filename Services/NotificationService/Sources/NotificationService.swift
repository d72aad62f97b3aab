import Foundation
import Hummingbird
import ServiceKit

/// Push notifications to Android (FCM) and iOS (APNs).
package enum NotificationService: ServiceDefinition {
    package static let name = "notification-service"
    package static let defaultPort = 8085
    package static let defaultSchema = "notification"

    package static func migrations() throws -> MigrationSet {
        try MigrationSet(component: name, bundle: .module)
    }

    package static func makeApplication(platform: ServicePlatform, environment: ServiceEnvironment) async throws
        -> ServiceApplication
    {
        platform.makeApplication(router: platform.makeRouter())
    }
}
