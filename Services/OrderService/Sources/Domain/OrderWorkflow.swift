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

    /// Creates a customer's order from `vendorId` within the caller's transaction and records `OrderCreated`;
    /// 422 if there is no such vendor.
    package func create(
        by customer: OrderActor, vendorId: String, deliveryAddress: Address, paymentMode: PaymentMode,
        totalAmount: Decimal, requiresPhotoProof: Bool, on connection: PostgresConnection
    ) async throws -> OrderView {
        guard let vendor = try await store.vendor(vendorId, on: connection) else {
            throw APIError(.unprocessableContent, code: .validationFailed, message: "no vendor \(vendorId)")
        }
        let now = self.now()
        let order = OrderView(
            id: UUID().uuidString.lowercased(), status: .pendingVendorAcceptance, customerId: customer.id,
            vendor: VendorRef(id: vendor.id, name: vendor.name, address: vendor.address),
            deliveryAddress: deliveryAddress, paymentMode: paymentMode, totalAmount: totalAmount,
            requiresPhotoProof: requiresPhotoProof, rider: nil, riderArrivedAt: nil, proofPhoto: nil, version: 1,
            createdAt: now, updatedAt: now
        )
        try await store.insertOrder(order, on: connection)
        let created = OrderCreated(
            orderId: order.id, customerId: order.customerId, vendor: order.vendor, deliveryAddress: deliveryAddress,
            paymentMode: paymentMode, totalAmount: totalAmount, requiresPhotoProof: requiresPhotoProof
        )
        try await store.record(
            EventEnvelope(aggregateId: order.id, occurredAt: now, payload: created), aggregateType: "order",
            sequence: order.version, actor: customer, on: connection
        )
        return order
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

        let payload = OrderTransitionEvent.payload(
            for: action, order: order, previousRider: previousRider, actor: actor, reason: reason, offerId: offerId,
            at: now)
        if let payload { try await record(payload) }
        return order

        func record(_ payload: some EventPayload) async throws {
            let envelope = EventEnvelope(aggregateId: order.id, occurredAt: now, payload: payload)
            var push: [OutboxEntry] = []
            if case .pickUp = action {
                push = [
                    try await startPickupSaga(
                        order: order, rider: OrderTransitionEvent.pickupRider(of: order, actor: actor),
                        pickupEventId: envelope.eventId, at: now, on: connection)
                ]
            }
            try await store.record(
                envelope, aggregateType: "order", sequence: order.version, actor: actor, alsoPublishing: push,
                on: connection)
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

    /// Starts the saga of a pickup and returns the customer's push, for the outbox with the pickup's event.
    private func startPickupSaga(
        order: OrderView, rider: PersonRef, pickupEventId: UUID, at startedAt: Date, on connection: PostgresConnection
    ) async throws -> OutboxEntry {
        let push = Self.pickupNotification(order: order, rider: rider)
        // The vendor's `order_update` is written with the pickup: that step is done with it.
        try await store.sagas.start(
            orderId: order.id, pickupEventId: pickupEventId, notificationId: push.notificationId, at: startedAt,
            on: connection)
        return try store.outbox.entry(push, aggregateId: order.customerId)
    }
}
