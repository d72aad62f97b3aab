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

    package func handle(_ event: DecodedEvent, on connection: PostgresConnection) async throws {
        switch event.payload {
        case let accepted as OfferAccepted:
            try await assign(accepted.rider, to: accepted.orderId, offerId: accepted.offerId, on: connection)
        case let chosen as OperatorAssignedRider:
            try await assign(chosen.rider, to: chosen.orderId, offerId: nil, on: connection)
        case let released as OperatorReleasedOrder:
            try await unassign(released, on: connection)
        default:
            break
        }
    }

    private func assign(_ rider: PersonRef, to orderIdText: String, offerId: String?, on connection: PostgresConnection)
        async throws
    {
        let refusal = Refusal(orderId: orderIdText, offerId: offerId, riderId: rider.id)
        guard let orderId = UUID(uuidString: orderIdText) else {
            try await refuse(refusal, status: "Unknown", order: nil, on: connection)
            return
        }
        let order: OrderView
        do {
            order = try await store.order(orderId, forUpdate: true, on: connection)
        } catch OrderRecordError.noOrder {
            try await refuse(refusal, status: "Unknown", order: nil, on: connection)
            return
        }
        do {
            _ = try OrderRules.apply(.assignRider(rider), to: order.snapshot, by: nil)
        } catch {
            try await refuse(refusal, status: order.status.rawValue, order: order, on: connection)
            return
        }
        _ = try await workflow.apply(.assignRider(rider), to: orderId, by: nil, offerId: offerId, on: connection)
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
        _ = try await workflow.apply(.unassignRider, to: orderId, by: nil, on: connection)
    }

    private struct Refusal {
        var orderId: String
        var offerId: String?
        var riderId: String
    }

    private func refuse(_ assignment: Refusal, status: String, order: OrderView?, on connection: PostgresConnection)
        async throws
    {
        let refusal = EventEnvelope(
            aggregateId: assignment.orderId,
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

    package func handle(_ event: DecodedEvent, on connection: PostgresConnection) async throws {
        if let started = event.payload(as: TrackingStarted.self), started.kind == .delivery,
            let orderId = UUID(uuidString: started.jobId)
        {
            try await sagas.complete(.trackingStarted, of: orderId, on: connection)
        } else if let sent = event.payload(as: PushSent.self), sent.kind == .orderPickedUp,
            let orderId = sent.correlationId.flatMap(UUID.init(uuidString:))
        {
            try await sagas.complete(.customerNotified, of: orderId, on: connection)
        } else if let failed = event.payload(as: PushFailed.self), failed.kind == .orderPickedUp,
            let orderId = failed.correlationId.flatMap(UUID.init(uuidString:))
        {
            try await sagas.recordNotificationFailure(of: orderId, reason: failed.reason, on: connection)
        }
    }
}

/// What `/orders` sockets receive when an order or service request changes.
package struct OrderUpdate: Codable, Sendable, Equatable {
    package var orderId: String
    /// The event, e.g. `OrderPickedUp`.
    package var type: String
    /// The order's status after it, when the event changes it.
    package var status: OrderStatus?
    package var rider: PersonRef?
    package var occurredAt: Date
}

/// Feeds the `/orders` namespace from orders.events: customers see their orders change, vendors their
/// dashboards (the vendor-updated step of the pickup saga). Every instance consumes every event and emits to its
/// own sockets.
package struct OrderStream: Sendable {
    let namespace: SocketIONamespace
    let sagas: PickupSagas
    let logger: Logger

    /// The rooms of a customer's, a vendor's, a technician's and the admins' sockets.
    package static func customerRoom(_ id: String) -> String { "customer:\(id)" }
    package static func vendorRoom(_ id: String) -> String { "vendor:\(id)" }
    package static func technicianRoom(_ id: String) -> String { "technician:\(id)" }
    package static let adminRoom = "admins"

    /// The room a socket of `identity` joins, if any.
    static func room(of identity: Identity) -> String? {
        switch identity.role {
        case .customer: customerRoom(identity.userId)
        case .vendor: vendorRoom(identity.userId)
        case .technician: technicianRoom(identity.userId)
        case .admin: adminRoom
        default: nil
        }
    }

    package func handle(_ event: DecodedEvent) async throws {
        guard let (customerId, vendorId, status, rider) = Self.parties(of: event.payload) else { return }
        let update = OrderUpdate(
            orderId: event.header.aggregateId, type: event.header.type, status: status, rider: rider,
            occurredAt: event.header.occurredAt
        )
        var rooms = [Self.customerRoom(customerId), Self.adminRoom]
        if let vendorId { rooms.append(Self.vendorRoom(vendorId)) }
        // A technician follows the service requests assigned to them (a request event's person is its technician).
        if event.payload is ServiceRequestAssigned || event.payload is ServiceRequestStatusChanged, let rider {
            rooms.append(Self.technicianRoom(rider.id))
        }
        // Every instance reads orders.events and emits; the realtime log delivers the first.
        await namespace.emit(
            "order_update", try SocketIOArguments(encoding: update), toRooms: rooms,
            dedupeKey: event.header.eventId.uuidString)
        if event.header.type == OrderPickedUp.eventType, let orderId = UUID(uuidString: event.header.aggregateId) {
            try await sagas.database.withConnection { connection in
                try await sagas.complete(.vendorUpdated, of: orderId, on: connection)
            }
        }
    }

    /// Who an event concerns (customer, vendor) and the status and rider it leaves the order with.
    static func parties(of payload: any EventPayload) -> (String, String?, OrderStatus?, PersonRef?)? {
        switch payload {
        case let event as OrderCreated: (event.customerId, event.vendor.id, .pendingVendorAcceptance, nil)
        case let event as OrderAccepted: (event.customerId, event.vendorId, .preparing, nil)
        case let event as OrderReadyForPickup: (event.customerId, event.vendor.id, .readyForPickup, nil)
        case let event as RiderAssigned: (event.customerId, event.vendorId, nil, event.rider)
        case let event as RiderReassigned: (event.customerId, event.vendorId, nil, event.rider)
        case let event as RiderUnassigned: (event.customerId, event.vendorId, nil, nil)
        case let event as RiderArrivedAtStore: (event.customerId, event.vendorId, nil, nil)
        case let event as OrderPickedUp: (event.customerId, event.vendor.id, .inTransit, event.rider)
        case let event as OrderDelivered: (event.customerId, event.vendorId, .delivered, nil)
        case let event as OrderCancelled: (event.customerId, event.vendorId, .cancelled, nil)
        case let event as ServiceRequestCreated: (event.customerId, nil, nil, nil)
        case let event as ServiceRequestAssigned: (event.customerId, nil, nil, event.technician)
        case let event as ServiceRequestStatusChanged: (event.customerId, nil, nil, event.technician)
        default: nil
        }
    }
}
