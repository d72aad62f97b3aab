import Contracts
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// Applies order transitions: read the order, check the rules, then in one statement write the new state if the
/// order is still at the version read, append the event to the immutable log and the outbox, and write its
/// `order_update` (and, for the pickup, start the saga and queue the customer's push); read again and check again
/// if another change got there first.
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

    /// How many times a transition is tried again after another change to the order got there first, before
    /// giving up with 409.
    static let maximumAttempts = 8

    /// Applies `action` to order `id` on a connection of `database` without a transaction, and answers `request`:
    /// the order is read, then changed in one statement that commits by itself if the order is still at the version
    /// read (a transaction would add BEGIN and COMMIT), with the answer stored under the request's Idempotency-Key
    /// if it has one. A request whose key has an answer gets that answer, replayed, and changes nothing. Two round
    /// trips, with a key or without.
    /// - Throws: 422 `IDEMPOTENCY_KEY_REUSED` if the key was used for another request.
    package func apply(
        _ action: OrderAction, to id: UUID, by actor: OrderActor?, reason: String? = nil,
        answering request: IdempotentRequest, in database: Database
    ) async throws -> (answer: IdempotentRequest.StoredAnswer, replayed: Bool) {
        // The order and the stored answer in one snapshot: an answer stored later finds the order changed when this
        // request writes. Read before any write, so that a pooled connection found closed fails with nothing done,
        // and all starts again.
        let read = { @Sendable (connection: PostgresConnection) in
            try await store.order(id, answering: request, on: connection)
        }
        return try await database.withConnection(reading: read) { connection, first in
            var (before, stored) = first
            for attempt in 0..<Self.maximumAttempts {
                if attempt > 0 { (before, stored) = try await read(connection) }
                if let stored { return (stored, true) }
                do {
                    if let after = try await change(
                        before, by: action, actor: actor, reason: reason, offerId: nil, answering: request,
                        on: connection)
                    {
                        return (try Self.answer(after), false)
                    }
                } catch  where IdempotentRequest.isKeyTaken(error) {
                    // Another request stored an answer under the key first: read next (422 if it was another request).
                }
            }
            // The last attempt may have lost to this key's own first request.
            if let stored = try await request.storedAnswer(on: connection, logger: store.logger) {
                return (stored, true)
            }
            throw Self.keptChanging
        }
    }

    /// What a transition's request is answered, and stored under its key: 200 with the order after it.
    static func answer(_ order: OrderView) throws -> IdempotentRequest.StoredAnswer {
        IdempotentRequest.StoredAnswer(status: 200, body: try ContractCoding.encode(order))
    }

    /// Applies `action` to order `id` on `connection`, in the caller's transaction if it has one, and returns the
    /// order after it. The order is read without a lock (or taken as `read`, if the caller just read it) and written
    /// only if no other change got there first (its version); otherwise it is read again and the rules checked
    /// again, up to ``maximumAttempts`` times.
    package func apply(
        _ action: OrderAction, to id: UUID, by actor: OrderActor?, reason: String? = nil, offerId: String? = nil,
        on connection: PostgresConnection, read: OrderView? = nil
    ) async throws -> OrderView {
        var read = read
        for _ in 0..<Self.maximumAttempts {
            let before: OrderView
            if let read { before = read } else { before = try await store.order(id, on: connection) }
            read = nil
            if let after = try await change(
                before, by: action, actor: actor, reason: reason, offerId: offerId, answering: nil, on: connection)
            {
                return after
            }
        }
        throw Self.keptChanging
    }

    /// The 409 of a transition that lost to other changes of the order ``maximumAttempts`` times.
    private static var keptChanging: APIError {
        APIError.conflict(
            .orderStateConflict, "the order kept changing while this request was applied to it; try again")
    }

    /// Writes `action`'s change to `order` (as read) with its event and the answer to `request`, or nothing if the
    /// rules allow it but it changes nothing. Returns the order after it, or nil if another change to the order got
    /// there first.
    private func change(
        _ before: OrderView, by action: OrderAction, actor: OrderActor?, reason: String?, offerId: String?,
        answering request: IdempotentRequest?, on connection: PostgresConnection
    ) async throws -> OrderView? {
        var order = before
        let next = try OrderRules.apply(action, to: order.snapshot, by: actor)
        // Checked, but nothing to record: the same rider assigned again, no rider to unassign.
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
        // A proof photo upload records no event: nothing to write (its route checks the rules itself, with the order
        // locked, and stores the photo).
        guard
            let payload = OrderTransitionEvent.payload(
                for: action, order: order, previousRider: previousRider, actor: actor, reason: reason,
                offerId: offerId, at: now)
        else { return before }
        var answering: (request: IdempotentRequest, answer: IdempotentRequest.StoredAnswer)?
        if let request, request.key != nil { answering = (request, try Self.answer(order)) }
        return try await record(payload) ? order : nil

        func record(_ payload: some EventPayload) async throws -> Bool {
            let envelope = EventEnvelope(aggregateId: order.id, occurredAt: now, payload: payload)
            guard case .pickUp = action else {
                return try await store.recordTransition(
                    order, envelope, actor: actor, answering: answering, on: connection)
            }
            // The saga starts with the pickup, and the customer's push leaves with its event.
            let push = Self.pickupNotification(
                order: order, rider: OrderTransitionEvent.pickupRider(of: order, actor: actor))
            return try await store.recordTransition(
                order, envelope, actor: actor,
                alsoPublishing: [try store.outbox.entry(push, aggregateId: order.customerId)],
                startingSagaNotifying: push.notificationId, answering: answering, on: connection)
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
}
