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
        OrderSocketHandlers().register(on: orders)
        let updates = OrderUpdates(emits: realtime.emitter(for: orders, numbering: OrderUpdates.numbering))
        let store = OrderStore(outbox: platform.outbox, updates: updates, logger: platform.logger)
        let workflow = OrderWorkflow(database: platform.database, store: store, now: platform.now)
        let sagas = PickupSagas(database: platform.database, store: store, now: platform.now)

        let assignments = RiderAssignmentConsumer(workflow: workflow, store: store)
        // It locks only the orders it assigns and its emits are numbered at commit, so a backlog goes 32 a transaction.
        platform.addConsumer(
            name: "rider-assignments", topics: [.allocationEvents], batchLimit: 32, wanted: assignments.wants
        ) { event, connection in
            try await assignments.handle(event, on: connection)
        }
        let sagaReports = PickupSagaConsumer(sagas: sagas)
        platform.addConsumer(
            name: "pickup-saga", topics: [.trackingEvents, .notificationsEvents], wanted: PickupSagaConsumer.wants
        ) { event, connection in
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
