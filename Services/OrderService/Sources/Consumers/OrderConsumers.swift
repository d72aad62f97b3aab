import Contracts
import Foundation
import Logging
import PostgresNIO
import Realtime
import ServiceKit

/// Allocation's accepted offers and operators' choices become rider assignments; an order that cannot take a
/// rider any more refuses, so Allocation releases the rider. An operator's release unassigns the rider.
package struct RiderAssignmentConsumer: Sendable {
    let workflow: OrderWorkflow
    let store: OrderStore

    /// Whether the event assigns or releases a rider: the others (offers sent, rejected, failed) are skipped
    /// without a transaction.
    package func wants(_ event: DecodedEvent) -> Bool { step(for: event) != nil }

    /// Assigns or releases the event's rider in `connection`'s transaction.
    package func handle(_ event: DecodedEvent, on connection: PostgresConnection) async throws {
        try await step(for: event)?(connection)
    }

    private func step(for event: DecodedEvent) -> EventConsumer.Step<Void>? {
        switch event.payload {
        case let accepted as OfferAccepted:
            return { try await assign(accepted.rider, to: accepted.orderId, offerId: accepted.offerId, on: $0) }
        case let chosen as OperatorAssignedRider:
            return { try await assign(chosen.rider, to: chosen.orderId, offerId: nil, on: $0) }
        case let released as OperatorReleasedOrder:
            return { try await unassign(released, on: $0) }
        default:
            return nil
        }
    }

    private func assign(_ rider: PersonRef, to orderIdText: String, offerId: String?, on connection: PostgresConnection)
        async throws
    {
        let refusal = Refusal(orderId: orderIdText, offerId: offerId, riderId: rider.id)
        guard let orderId = UUID(uuidString: orderIdText) else {
            try await refuse(refusal, status: .noSuchOrder, order: nil, on: connection)
            return
        }
        let order: OrderView
        do {
            order = try await store.order(orderId, forUpdate: true, on: connection)
        } catch OrderRecordError.noOrder {
            try await refuse(refusal, status: .noSuchOrder, order: nil, on: connection)
            return
        }
        do {
            _ = try OrderRules.apply(.assignRider(rider), to: order.snapshot, by: nil)
        } catch {
            try await refuse(refusal, status: .status(order.status), order: order, on: connection)
            return
        }
        _ = try await workflow.apply(
            .assignRider(rider), to: orderId, by: nil, offerId: offerId, on: connection, read: order)
    }

    /// Unassigns the released rider if they still hold the order before pickup; otherwise (picked up, cancelled,
    /// already someone else's) there is nothing to undo, and allocation learns the order's fate from its events.
    private func unassign(_ released: OperatorReleasedOrder, on connection: PostgresConnection) async throws {
        var order: OrderView?
        let orderId = UUID(uuidString: released.orderId)
        if let orderId {
            do {
                order = try await store.order(orderId, forUpdate: true, on: connection)
            } catch OrderRecordError.noOrder {
                order = nil
            }
        }
        guard let orderId, let order, order.rider?.id == released.riderId,
            (try? OrderRules.apply(.unassignRider, to: order.snapshot, by: nil)) != nil
        else {
            store.logger.info(
                "an operator's release had nothing to undo",
                metadata: ["order.id": "\(released.orderId)", "rider.id": "\(released.riderId)"])
            return
        }
        _ = try await workflow.apply(.unassignRider, to: orderId, by: nil, on: connection, read: order)
    }

    private struct Refusal {
        var orderId: String
        var offerId: String?
        var riderId: String
    }

    private func refuse(
        _ assignment: Refusal, status: RefusedOrderState, order: OrderView?, on connection: PostgresConnection
    ) async throws {
        let refusal = EventEnvelope(
            aggregateId: assignment.orderId, occurredAt: workflow.now(),
            payload: RiderAssignmentRefused(
                orderId: assignment.orderId, offerId: assignment.offerId, riderId: assignment.riderId,
                orderStatus: status)
        )
        store.logger.info(
            "refused a rider assignment", metadata: ["order.id": "\(assignment.orderId)", "order.status": "\(status)"])
        guard var order else {
            try await store.outbox.enqueue(refusal, on: connection, logger: store.logger)
            return
        }
        order.version += 1
        order.updatedAt = workflow.now()
        try await store.update(order, on: connection)
        try await store.record(refusal, aggregateType: "order", sequence: order.version, actor: nil, on: connection)
    }
}

/// Other services' reports on the pickup's downstream steps (tracking started, customer notified).
package struct PickupSagaConsumer: Sendable {
    let sagas: PickupSagas

    /// What an event reports on a pickup saga.
    private enum Report {
        case trackingStarted(UUID)
        case customerNotified(UUID)
        case notificationFailed(UUID, reason: String)
    }

    private static func report(in event: DecodedEvent) -> Report? {
        if let started = event.payload(as: TrackingStarted.self), started.kind == .delivery,
            let orderId = UUID(uuidString: started.jobId)
        {
            return .trackingStarted(orderId)
        } else if let sent = event.payload(as: PushSent.self), sent.kind == .orderPickedUp,
            let orderId = sent.correlationId.flatMap(UUID.init(uuidString:))
        {
            return .customerNotified(orderId)
        } else if let failed = event.payload(as: PushFailed.self), failed.kind == .orderPickedUp,
            let orderId = failed.correlationId.flatMap(UUID.init(uuidString:))
        {
            return .notificationFailed(orderId, reason: failed.reason)
        }
        return nil
    }

    /// Whether the event reports on a pickup saga: every other push's outcome is skipped without a transaction.
    package static func wants(_ event: DecodedEvent) -> Bool { report(in: event) != nil }

    package func handle(_ event: DecodedEvent, on connection: PostgresConnection) async throws {
        switch Self.report(in: event) {
        case .trackingStarted(let orderId): try await sagas.complete(.trackingStarted, of: orderId, on: connection)
        case .customerNotified(let orderId): try await sagas.complete(.customerNotified, of: orderId, on: connection)
        case .notificationFailed(let orderId, let reason):
            try await sagas.recordNotificationFailure(of: orderId, reason: reason, on: connection)
        case nil: break
        }
    }
}
