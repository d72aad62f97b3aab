import Contracts
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// Applies order transitions: in one transaction, lock the order row, check the rules, write the new state,
/// append the event to the immutable log and the outbox (and, for the pickup, start the saga and queue the
/// customer's push). Commit.
package struct OrderWorkflow: Sendable {
    package let database: Database
    package let store: OrderStore
    package let now: Now

    package init(database: Database, store: OrderStore, now: Now) {
        self.database = database
        self.store = store
        self.now = now
    }

    /// Applies `action` to order `id` within the caller's transaction and returns the order after it.
    package func apply(
        _ action: OrderAction, to id: UUID, by actor: OrderActor?, reason: String? = nil, offerId: String? = nil,
        on connection: PostgresConnection
    ) async throws -> OrderView {
        var order = try await store.order(id, forUpdate: true, on: connection)
        let next = try OrderRules.apply(action, to: order.snapshot, by: actor)
        // Checked, but nothing to record: a photo upload, or the same rider assigned again.
        if case .uploadProofPhoto = action { return order }
        if case .assignRider(let rider) = action, order.rider?.id == rider.id { return order }
        if case .unassignRider = action, order.rider == nil { return order }
        let now = self.now()
        let previousRider = order.rider
        order.status = next.status
        order.rider = next.rider
        if next.riderArrived, order.riderArrivedAt == nil { order.riderArrivedAt = now }
        if !next.riderArrived { order.riderArrivedAt = nil }
        order.version += 1
        order.updatedAt = now
        try await store.update(order, on: connection)

        let aggregateId = order.id
        let sequence = order.version
        switch action {
        case .accept:
            try await record(
                OrderAccepted(orderId: aggregateId, customerId: order.customerId, vendorId: order.vendor.id))
        case .markReady:
            try await record(
                OrderReadyForPickup(
                    orderId: aggregateId, customerId: order.customerId, vendor: order.vendor,
                    deliveryArea: order.deliveryAddress.area, deliveryLocation: order.deliveryAddress.point,
                    totalAmount: order.totalAmount
                )
            )
        case .arrive:
            try await record(
                RiderArrivedAtStore(
                    orderId: aggregateId, customerId: order.customerId, vendorId: order.vendor.id,
                    riderId: actor?.id ?? "")
            )
        case .pickUp:
            let rider = order.rider ?? PersonRef(id: actor?.id ?? "", name: "")
            let pickedUp = EventEnvelope(
                aggregateId: aggregateId, occurredAt: now,
                payload: OrderPickedUp(
                    orderId: aggregateId, customerId: order.customerId, vendor: order.vendor, rider: rider,
                    destination: order.deliveryAddress, pickedUpAt: now
                )
            )
            // The saga first: the pickup's `order_update`s, written with its event, end the transaction.
            try await startPickupSaga(
                order: order, rider: rider, pickupEventId: pickedUp.eventId, at: now, on: connection)
            try await store.record(pickedUp, aggregateType: "order", sequence: sequence, actor: actor, on: connection)
        case .deliver:
            try await record(
                OrderDelivered(
                    orderId: aggregateId, customerId: order.customerId, vendorId: order.vendor.id,
                    riderId: order.rider?.id ?? "",
                    deliveredAt: now
                )
            )
        case .cancel:
            try await record(
                OrderCancelled(
                    orderId: aggregateId, customerId: order.customerId, vendorId: order.vendor.id,
                    riderId: order.rider?.id,
                    cancelledBy: actor?.role ?? .admin, reason: reason
                )
            )
        case .assignRider(let rider):
            if let previousRider, previousRider.id != rider.id {
                try await record(
                    RiderReassigned(
                        orderId: aggregateId, customerId: order.customerId, vendorId: order.vendor.id, offerId: offerId,
                        rider: rider, previousRiderId: previousRider.id
                    )
                )
            } else {
                try await record(
                    RiderAssigned(
                        orderId: aggregateId, customerId: order.customerId, vendorId: order.vendor.id, offerId: offerId,
                        rider: rider)
                )
            }
        case .unassignRider:
            try await record(
                RiderUnassigned(
                    orderId: aggregateId, customerId: order.customerId, vendorId: order.vendor.id,
                    previousRiderId: previousRider?.id ?? ""))
        case .uploadProofPhoto:
            break
        }
        return order

        func record<Payload: EventPayload>(_ payload: Payload) async throws {
            try await store.record(
                EventEnvelope(aggregateId: aggregateId, occurredAt: now, payload: payload), aggregateType: "order",
                sequence: sequence, actor: actor, on: connection
            )
        }
    }

    /// The push the customer gets when the rider picks the order up.
    package static func pickupNotification(order: OrderView, rider: PersonRef) -> PushRequested {
        let orderId = order.id
        let riderName = rider.name.isEmpty ? "Your rider" : rider.name
        return PushRequested(
            notificationId: "order-picked-up-\(orderId)", userId: order.customerId, kind: .orderPickedUp,
            title: "Your order is on the way",
            body: "\(riderName) has picked up your order from \(order.vendor.name).",
            data: ["link": "app://orders/\(orderId)/track", "orderId": orderId], priority: .high,
            collapseKey: "order-\(orderId)", ttlSeconds: 3600, correlationId: orderId
        )
    }

    private func startPickupSaga(
        order: OrderView, rider: PersonRef, pickupEventId: UUID, at startedAt: Date, on connection: PostgresConnection
    ) async throws {
        let push = Self.pickupNotification(order: order, rider: rider)
        try await store.outbox.enqueue(push, aggregateId: order.customerId, on: connection, logger: store.logger)
        // The vendor's `order_update` was written with the pickup: that step is done with it.
        try await connection.queryWhileOpen(
            """
            INSERT INTO pickup_sagas (order_id, pickup_event_id, notification_id, started_at, vendor_updated_at)
            VALUES (\(UUID(uuidString: order.id)), \(pickupEventId), \(push.notificationId), \(startedAt), \(startedAt))
            """, logger: store.logger
        )
    }
}
