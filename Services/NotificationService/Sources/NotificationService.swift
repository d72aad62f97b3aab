import Contracts
import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit

/// Push to Android (FCM HTTP v1) and iOS (APNs over HTTP/2), reliably: a device registry, deduplicated requests
/// from notifications.requests, bounded concurrency, retries with backoff, token clean-up, a delivery log.
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
        var platform = platform
        let settings = try NotificationSettings(environment: environment)
        let providers = try await settings.providers(logger: platform.logger)
        platform.logger.info(
            "push providers",
            metadata: [
                "push.android": "\(providers[.android]?.name ?? "-")", "push.ios": "\(providers[.ios]?.name ?? "-")",
            ]
        )
        let workflow = DeliveryWorkflow(
            settings: settings, outbox: platform.outbox, now: platform.now, logger: platform.logger)
        let database = platform.database
        let attempts = BackgroundTasks(
            name: "push-attempts", capacity: 10_000, concurrency: settings.concurrency, logger: platform.logger)
        platform.addService(attempts)
        let dispatcher = PushDispatcher(
            workflow: workflow, database: database, providers: providers, attempts: attempts,
            activity: platform.activity, logger: platform.logger)
        // Requests already fetched are accepted together: one transaction for up to `acceptBatch` of them.
        let requests = PushRequestConsumer(workflow: workflow, dispatcher: dispatcher)
        platform.addBatchConsumer(
            name: "notification-requests", topics: [.notificationsRequests], limit: settings.acceptBatch
        ) { events, connection in
            try await requests.handle(events, on: connection)
        }
        // Retries whose time came, and deliveries whose instance went away mid-attempt.
        platform.addDueJob(
            every: settings.tick, atLeastEvery: settings.idleTick, failure: "could not look for due pushes"
        ) {
            let (due, next) = try await database.withConnection { connection in
                (
                    try await workflow.due(limit: settings.concurrency * 4, on: connection),
                    try await workflow.nextDue(on: connection)
                )
            }
            dispatcher.enqueue(due)
            return next.map { .seconds($0.timeIntervalSince(workflow.now())) }
        }

        let router = platform.makeRouter()
        let api = router.group("v1").add(middleware: platform.authentication)
        NotificationRoutes(
            database: database, maximumDevicesPerUser: settings.maximumDevicesPerUser, store: workflow.store
        ).register(on: api)
        return platform.makeApplication(router: router)
    }
}
