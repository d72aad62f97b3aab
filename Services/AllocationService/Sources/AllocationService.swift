import Contracts
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import Realtime
import RealtimePlatform
import ServiceKit
import ServiceLifecycle
import Synchronization

/// Rider availability and task offers (RDR-010, RDR-020's online rule).
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
        var platform = platform
        let settings = try AllocationSettings(environment: environment)
        let workflow = AllocationWorkflow(
            settings: settings, outbox: platform.outbox, now: platform.now, logger: platform.logger)
        let realtime = try await platform.makeRealtimeServer(environment: environment)
        let riders = realtime.namespace("/rider")
        riders.requireToken(platform.verifier, roles: [.rider])
        let notifier = RiderNotifier(
            namespace: riders, emits: realtime.emitter(for: riders), database: platform.database, workflow: workflow,
            instanceId: realtime.instanceId, now: platform.now, logger: platform.logger)
        AllocationSocketHandlers(
            notifier: notifier, presence: workflow.presence, database: platform.database, logger: platform.logger
        ).register(on: riders)
        platform.keepFresh(workflow.presence, of: riders, instanceId: realtime.instanceId)
        let database = platform.database

        let orders = OrderAllocationConsumer(workflow: workflow, notifier: notifier)
        platform.addConsumer(name: "allocation-orders", topics: [.ordersEvents], wanted: orders.wants) {
            event, connection in
            try await orders.handle(event, on: connection)
        }
        // A new group reads the topic from its start, as every group does, so no outcome published while it joins
        // is lost; old outcomes match no pending offer.
        let pushes = OfferPushConsumer(workflow: workflow, notifier: notifier)
        platform.addConsumer(
            name: "allocation-pushes", topics: [.notificationsEvents], wanted: OfferPushConsumer.wants
        ) { event, connection in
            try await pushes.handle(event, on: connection)
        }
        let positions = RiderPositionConsumer(workflow: workflow)
        platform.addConsumer(name: "allocation-positions", topics: [.couriersPositions]) { event, connection in
            try await positions.handle(event, on: connection)
        }
        // Fires offer deadlines, skips unreachable riders and retries orders nobody took; the deadlines are rows,
        // so they fire after a restart too.
        let deadlines = DeadlineScheduler(database: database, workflow: workflow, notifier: notifier)
        platform.addDueJob(
            every: settings.tick, atLeastEvery: settings.idleTick, failure: "allocation deadlines could not be checked"
        ) {
            try await deadlines.round()
        }

        let router = platform.makeRouter()
        let api = router.group("v1").add(middleware: platform.authentication)
        AllocationRoutes(database: database, workflow: workflow, notifier: notifier).register(on: api)
        return platform.makeApplication(router: router, realtime: realtime)
    }
}
