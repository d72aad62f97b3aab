import Contracts
import Foundation
import PostgresNIO
import Realtime
import RealtimePlatform
import ServiceKit

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

/// The `/orders` namespace's `order_update`s, written with the events that cause them (``OrderStore/record``):
/// customers see their orders change, vendors their dashboards (the vendor-updated step of the pickup saga, done
/// with the pickup), technicians the visits assigned to them, admins every change.
package struct OrderUpdates: Sendable {
    let emits: RealtimeEmitter

    package init(emits: RealtimeEmitter) { self.emits = emits }

    /// The rooms of a customer's, a vendor's, a technician's and the admins' sockets.
    package static func customerRoom(_ id: String) -> String { "customer:\(id)" }
    package static func vendorRoom(_ id: String) -> String { "vendor:\(id)" }
    package static func technicianRoom(_ id: String) -> String { "technician:\(id)" }
    package static let adminRoom = "admins"

    /// The room a socket of `identity` joins, if any (one: each socket is in at most one of these rooms, so an
    /// update emitted to several reaches it once).
    static func room(of identity: Identity) -> String? {
        switch identity.role {
        case .customer: customerRoom(identity.userId)
        case .vendor: vendorRoom(identity.userId)
        case .technician: technicianRoom(identity.userId)
        case .admin: adminRoom
        default: nil
        }
    }

    /// When the updates take their offsets: as the transaction commits, since every order's update goes to the
    /// admins' room and many transactions write it at once (``EmitNumbering/atCommit``).
    package static let numbering = EmitNumbering.atCommit

    /// The call that writes an update in ``OrderStore/record``'s statement, its parameters numbered from `first`.
    static func emitCall(parametersFrom first: Int) -> String {
        RealtimeEmitter.emitCall(numbering: numbering, parametersFrom: first)
    }

    /// Appends the values of ``emitCall(parametersFrom:)`` that write the `order_update` of `envelope` to each
    /// party's room (to none for an event no party follows) to `bindings`.
    func appendEmitArguments<Payload: EventPayload>(
        _ envelope: EventEnvelope<Payload>, to bindings: inout PostgresBindings
    ) throws {
        guard let (customerId, vendorId, status, rider) = Self.parties(of: envelope.payload) else {
            try emits.appendEmitArguments("order_update", SocketIOArguments(), toRooms: [], to: &bindings)
            return
        }
        let update = OrderUpdate(
            orderId: envelope.aggregateId, type: envelope.type, status: status, rider: rider,
            occurredAt: envelope.occurredAt)
        var rooms = [Self.adminRoom, Self.customerRoom(customerId)]
        if let vendorId { rooms.append(Self.vendorRoom(vendorId)) }
        // A technician follows the service requests assigned to them (a request event's person is its technician).
        if envelope.payload is ServiceRequestAssigned || envelope.payload is ServiceRequestStatusChanged, let rider {
            rooms.append(Self.technicianRoom(rider.id))
        }
        // Sorted, so that transactions that emit to the same rooms take their streams' locks alike.
        try emits.appendEmitArguments(
            "order_update", update, toRooms: rooms.sorted(), to: &bindings)
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
