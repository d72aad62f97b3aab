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
        riders.onConnect { socket in
            await notifier.connected(socket)
            // A recovered socket got its missed emits, the offer among them.
            if !socket.recovered { await notifier.resendPendingOffer(to: socket) }
        }
        riders.forgetPresenceOnDisconnect(workflow.presence, database: platform.database, logger: platform.logger)
        riders.reportAppState(to: workflow.presence, database: platform.database)
        platform.keepFresh(workflow.presence, of: riders, instanceId: realtime.instanceId)
        riders.on("received", OfferReceipt.self) { socket, receipt in
            try await notifier.received(receipt, from: socket)
        }
        let database = platform.database

        // The riders are told in the same transaction (their emits commit with the change).
        platform.addConsumer(name: "allocation-orders", topics: [.ordersEvents]) {
            (event: DecodedEvent, connection: PostgresConnection) async throws in
            try await notifier.tell(try await workflow.apply(orderEvent: event, on: connection), on: connection)
        }
        // Push outcomes of offers still pending. A new group reads the topic from its start, as every group does,
        // so no outcome published while it joins is lost; old outcomes match no pending offer.
        platform.addConsumer(name: "allocation-pushes", topics: [.notificationsEvents]) {
            (event: DecodedEvent, connection: PostgresConnection) async throws in
            try await notifier.tell(try await workflow.pushOutcome(event, on: connection), on: connection)
        }
        platform.addConsumer(name: "allocation-positions", topics: [.couriersPositions]) {
            (event: DecodedEvent, connection: PostgresConnection) async throws in
            if let position = event.payload(as: PositionUpdated.self) {
                try await workflow.moved(position, on: connection)
            }
        }
        // Fires offer deadlines, skips unreachable riders and retries orders nobody took; the deadlines are rows,
        // so they fire after a restart too.
        let deadlines = DeadlineScheduler(database: database, workflow: workflow, notifier: notifier)
        platform.addPeriodicJob(every: settings.tick, failure: "allocation deadlines could not be checked") {
            try await deadlines.round()
        }

        let router = platform.makeRouter()
        let api = router.group("v1").add(middleware: platform.authentication)
        AllocationRoutes(database: database, workflow: workflow, notifier: notifier).register(on: api)
        return platform.makeApplication(router: router, realtime: realtime)
    }
}
