import Contracts
import Foundation
import Hummingbird
import Realtime
import RealtimePlatform
import ServiceKit

/// Orders and service requests: lifecycle, the pickup saga, the order event log, the `/orders` live stream.
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
        var platform = platform
        let settings = try OrderServiceSettings(environment: environment)
        let realtime = try await platform.makeRealtimeServer(environment: environment)
        let orders = realtime.namespace("/orders")
        orders.requireToken(platform.verifier)
        orders.onConnect { socket in
            guard let identity = socket.identity, let room = OrderUpdates.room(of: identity) else { return }
            socket.join(room)
        }
        // A recovered socket keeps only the room its current token gives (an admin demoted meanwhile loses theirs).
        orders.checkRecoveredRooms { user, _, rooms in
            guard let identity = user as? Identity, let room = OrderUpdates.room(of: identity) else { return [] }
            return rooms.intersection([room])
        }
        let store = OrderStore(
            outbox: platform.outbox, updates: OrderUpdates(emits: realtime.emitter(for: orders, numbering: .atCommit)),
            logger: platform.logger)
        let workflow = OrderWorkflow(database: platform.database, store: store, now: platform.now)
        let sagas = PickupSagas(database: platform.database, store: store, now: platform.now)

        let assignments = RiderAssignmentConsumer(workflow: workflow, store: store)
        platform.addConsumer(name: "rider-assignments", topics: [.allocationEvents]) { event, connection in
            try await assignments.handle(event, on: connection)
        }
        let sagaReports = PickupSagaConsumer(sagas: sagas)
        platform.addConsumer(name: "pickup-saga", topics: [.trackingEvents, .notificationsEvents]) {
            event, connection in
            try await sagaReports.handle(event, on: connection)
        }
        // Republishes stalled pickup-saga steps.
        platform.addPeriodicJob(every: settings.sagaCheckInterval, failure: "could not check pickup sagas") {
            _ = try await sagas.republishStalled(
                stepTimeout: settings.sagaStepTimeout, maximumRepublishes: settings.sagaMaximumRepublishes)
        }

        let router = platform.makeRouter()
        let api = router.group("v1").add(middleware: platform.authentication)
        OrderRoutes(database: platform.database, store: store, workflow: workflow, sagas: sagas, settings: settings)
            .register(on: api)
        ServiceRequestRoutes(database: platform.database, store: store, now: platform.now).register(on: api)
        return platform.makeApplication(router: router, realtime: realtime)
    }
}

/// The order service's own settings.
package struct OrderServiceSettings: Sendable {
    /// `PROOF_PHOTO_MAX_BYTES`, default 5 MiB.
    package var proofPhotoMaxBytes: Int
    /// `SAGA_STEP_TIMEOUT_SECONDS`, default 30: a pickup step not reported by then is republished.
    package var sagaStepTimeout: Duration
    /// `SAGA_CHECK_INTERVAL_MS`, default 5000.
    package var sagaCheckInterval: Duration
    /// `SAGA_MAX_REPUBLISHES`, default 10: a saga whose steps still have not reported after this many republishes
    /// ends failed (shown to admins) and is left alone.
    package var sagaMaximumRepublishes: Int

    package init(environment: ServiceEnvironment) throws(ConfigurationError) {
        proofPhotoMaxBytes = try environment.int("PROOF_PHOTO_MAX_BYTES", default: 5 << 20, in: 1_024...(50 << 20))
        sagaStepTimeout = try environment.seconds("SAGA_STEP_TIMEOUT_SECONDS", default: .seconds(30), in: 1...86_400)
        sagaCheckInterval = try environment.milliseconds(
            "SAGA_CHECK_INTERVAL_MS", default: .seconds(5), in: 100...3_600_000)
        sagaMaximumRepublishes = try environment.int("SAGA_MAX_REPUBLISHES", default: 10, in: 0...1000)
    }
}
