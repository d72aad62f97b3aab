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

/// Runs the deadline rounds. A round that found the database unreachable, or waited over ``outageEvidence`` for a
/// connection (the pool waits while Postgres is down), resumes after the outage
/// (``AllocationWorkflow/resumeAfterOutage(on:)``).
final class DeadlineScheduler: Sendable {
    /// A wait for a connection this long means the database was unreachable, not busy.
    static let outageEvidence: Duration = .seconds(1)

    let database: Database
    let workflow: AllocationWorkflow
    let notifier: RiderNotifier
    private let databaseWasUnreachable = Mutex(false)

    init(database: Database, workflow: AllocationWorkflow, notifier: RiderNotifier) {
        self.database = database
        self.workflow = workflow
        self.notifier = notifier
    }

    func round() async throws {
        let failedBefore = databaseWasUnreachable.withLock { $0 }
        let asked = workflow.now()
        do {
            try await database.transaction { connection in
                let waited = workflow.now().timeIntervalSince(asked)
                let notices = try await workflow.runDeadlines(
                    afterOutage: failedBefore || waited > Self.outageEvidence.timeInterval, on: connection)
                try await notifier.tell(notices, on: connection)
            }
        } catch {
            if Database.isUnavailable(error) { databaseWasUnreachable.withLock { $0 = true } }
            throw error
        }
        databaseWasUnreachable.withLock { $0 = false }
    }
}

/// `received` from the rider's app: it has the offer on screen.
struct OfferReceipt: Codable, Sendable { var offerId: String }

/// Tells riders' sockets (on every instance) about offers.
struct RiderNotifier: Sendable {
    let namespace: SocketIONamespace
    /// The `/rider` emits, written in the transactions that cause them.
    let emits: RealtimeEmitter
    let database: Database
    let workflow: AllocationWorkflow
    let instanceId: String
    let now: Now
    let logger: Logger

    struct Expired: Codable, Sendable {
        var offerId: String
        var orderId: String
        var reason = "timed_out"
    }

    struct Rescinded: Codable, Sendable {
        var offerId: String
        var orderId: String
        var message = "This offer is no longer available"
    }

    struct WentOffline: Codable, Sendable {
        var reason: OfflineReason
        var message: String
    }

    struct OrderCancelled: Codable, Sendable {
        var orderId: String
        var message = AllocationRules.cancellationMessage
    }

    /// `order_assigned` and `order_unassigned`: an operator gave the rider an order, or took it away.
    struct OrderChanged: Codable, Sendable {
        var orderId: String
        var message: String
    }

    /// Writes each notice's emit to its rider's sockets in `connection`'s transaction.
    func tell(_ notices: [RiderNotice], on connection: PostgresConnection) async throws {
        for notice in notices {
            switch notice {
            case .offer(let riderId, let offer):
                try await emits.emit("offer", offer, toUser: riderId, on: connection)
            case .expired(let riderId, let offerId, let orderId):
                try await emits.emit(
                    "offer_expired", Expired(offerId: offerId, orderId: orderId), toUser: riderId, on: connection)
            case .rescinded(let riderId, let offerId, let orderId):
                try await emits.emit(
                    "offer_rescinded", Rescinded(offerId: offerId, orderId: orderId), toUser: riderId, on: connection)
            case .orderCancelled(let riderId, let orderId):
                try await emits.emit(
                    "order_cancelled", OrderCancelled(orderId: orderId), toUser: riderId, on: connection)
            case .wentOffline(let riderId, let reason):
                try await emits.emit(
                    "went_offline", WentOffline(reason: reason, message: reason.message(settings: workflow.settings)),
                    toUser: riderId, on: connection)
            case .assigned(let riderId, let orderId):
                try await emits.emit(
                    "order_assigned", OrderChanged(orderId: orderId, message: AllocationRules.assignedMessage),
                    toUser: riderId, on: connection)
            case .unassigned(let riderId, let orderId):
                try await emits.emit(
                    "order_unassigned", OrderChanged(orderId: orderId, message: AllocationRules.unassignedMessage),
                    toUser: riderId, on: connection)
            }
        }
    }

    /// Records the rider's socket as live, so what happens to their order while it is is told there, not pushed.
    func connected(_ socket: SocketIOSocket) async {
        guard let riderId = socket.identity?.userId else { return }
        do {
            try await database.withConnection {
                try await workflow.presence.enter(
                    socketId: socket.id, room: SocketPresence.anywhere, userId: riderId, instanceId: instanceId,
                    now: now(), on: $0)
            }
        } catch {
            logger.warning("could not record a rider's socket", metadata: ["error": "\(error)"])
        }
    }

    /// A rider connecting sees their pending offer again: emitted to the socket's own room's stream, so it is
    /// replayed should the connection drop before it arrives.
    func resendPendingOffer(to socket: SocketIOSocket) async {
        do {
            guard let riderId = socket.identity?.userId else { return }
            try await database.transaction { connection in
                guard let offer = try await workflow.pendingOffer(riderId: riderId, on: connection) else { return }
                try await emits.emit("offer", offer, toRoom: socket.id, on: connection)
            }
        } catch {
            logger.warning("could not send a connecting rider their pending offer", metadata: ["error": "\(error)"])
        }
    }

    func received(_ receipt: OfferReceipt, from socket: SocketIOSocket) async throws -> OfferView {
        guard let riderId = socket.identity?.userId else { throw APIError.unauthorized("not signed in") }
        guard let offerId = UUID(uuidString: receipt.offerId) else {
            throw APIError.validation("'offerId' is not an offer id")
        }
        return try await database.transaction { try await workflow.received(offerId, riderId: riderId, on: $0) }
    }
}
