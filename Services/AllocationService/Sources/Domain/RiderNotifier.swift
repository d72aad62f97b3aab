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
