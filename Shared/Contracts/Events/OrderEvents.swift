import Foundation

// One file per topic: the payloads published on orders.events, which travel together.

/// A delivery order's status.
package enum OrderStatus: String, Codable, Sendable, CaseIterable {
    case pendingVendorAcceptance = "PendingVendorAcceptance"
    case preparing = "Preparing"
    case readyForPickup = "ReadyForPickup"
    case inTransit = "InTransit"
    case delivered = "Delivered"
    case cancelled = "Cancelled"

    /// Delivered and Cancelled are final: nothing moves the order on.
    package var isFinal: Bool { self == .delivered || self == .cancelled }
}

// Events on orders.events, keyed by order id (or service-request id). Each carries what its consumers need,
// so none of them has to call the Order service back.

package struct OrderCreated: EventPayload {
    package static let eventType = "OrderCreated"
    package static let topic = Topic.ordersEvents
    package var orderId: String
    package var customerId: String
    package var vendor: VendorRef
    package var deliveryAddress: Address
    package var paymentMode: PaymentMode
    package var totalAmount: Decimal
    package var requiresPhotoProof: Bool
    package init(
        orderId: String, customerId: String, vendor: VendorRef, deliveryAddress: Address, paymentMode: PaymentMode,
        totalAmount: Decimal, requiresPhotoProof: Bool
    ) {
        self.orderId = orderId
        self.customerId = customerId
        self.vendor = vendor
        self.deliveryAddress = deliveryAddress
        self.paymentMode = paymentMode
        self.totalAmount = totalAmount
        self.requiresPhotoProof = requiresPhotoProof
    }
}

package struct OrderAccepted: EventPayload {
    package static let eventType = "OrderAccepted"
    package static let topic = Topic.ordersEvents
    package var orderId: String
    package var customerId: String
    package var vendorId: String
    package init(orderId: String, customerId: String, vendorId: String) {
        self.orderId = orderId
        self.customerId = customerId
        self.vendorId = vendorId
    }
}

/// The order waits for a rider: Allocation starts offering it.
package struct OrderReadyForPickup: EventPayload {
    package static let eventType = "OrderReadyForPickup"
    package static let topic = Topic.ordersEvents
    package var orderId: String
    package var customerId: String
    package var vendor: VendorRef
    /// The neighbourhood of the delivery, shown in offers instead of the customer's address.
    package var deliveryArea: String
    /// Where the order goes, for trip distance and earnings; never shown to a rider before acceptance.
    package var deliveryLocation: GeoPoint
    package var totalAmount: Decimal
    package init(
        orderId: String, customerId: String, vendor: VendorRef, deliveryArea: String, deliveryLocation: GeoPoint,
        totalAmount: Decimal
    ) {
        self.orderId = orderId
        self.customerId = customerId
        self.vendor = vendor
        self.deliveryArea = deliveryArea
        self.deliveryLocation = deliveryLocation
        self.totalAmount = totalAmount
    }
}

package struct RiderAssigned: EventPayload {
    package static let eventType = "RiderAssigned"
    package static let topic = Topic.ordersEvents
    package var orderId: String
    package var customerId: String
    package var vendorId: String
    package var offerId: String?
    package var rider: PersonRef
    package init(orderId: String, customerId: String, vendorId: String, offerId: String?, rider: PersonRef) {
        self.orderId = orderId
        self.customerId = customerId
        self.vendorId = vendorId
        self.offerId = offerId
        self.rider = rider
    }
}

/// Another rider took over the order: the previous one loses access to it (chat, tracking) at once.
package struct RiderReassigned: EventPayload {
    package static let eventType = "RiderReassigned"
    package static let topic = Topic.ordersEvents
    package var orderId: String
    package var customerId: String
    package var vendorId: String
    package var offerId: String?
    package var rider: PersonRef
    package var previousRiderId: String
    package init(
        orderId: String, customerId: String, vendorId: String, offerId: String?, rider: PersonRef,
        previousRiderId: String
    ) {
        self.orderId = orderId
        self.customerId = customerId
        self.vendorId = vendorId
        self.offerId = offerId
        self.rider = rider
        self.previousRiderId = previousRiderId
    }
}

/// An operator took the order away from its rider before pickup; allocation looks for another.
package struct RiderUnassigned: EventPayload {
    package static let eventType = "RiderUnassigned"
    package static let topic = Topic.ordersEvents
    package var orderId: String
    package var customerId: String
    package var vendorId: String
    package var previousRiderId: String
    package init(orderId: String, customerId: String, vendorId: String, previousRiderId: String) {
        self.orderId = orderId
        self.customerId = customerId
        self.vendorId = vendorId
        self.previousRiderId = previousRiderId
    }
}

/// Order refused an accepted offer or an operator's assignment (the order was cancelled or picked up): Allocation
/// releases that rider.
package struct RiderAssignmentRefused: EventPayload {
    package static let eventType = "RiderAssignmentRefused"
    package static let topic = Topic.ordersEvents
    package var orderId: String
    /// The accepted offer; nil for an operator's assignment.
    package var offerId: String?
    package var riderId: String
    /// The order's state when it refused, e.g. `Cancelled`, or `Unknown` when there is no such order.
    package var orderStatus: RefusedOrderState
    package init(orderId: String, offerId: String?, riderId: String, orderStatus: RefusedOrderState) {
        self.orderId = orderId
        self.offerId = offerId
        self.riderId = riderId
        self.orderStatus = orderStatus
    }
}

/// The order's state in a ``RiderAssignmentRefused``: on the wire one string, the status's raw value or `Unknown`;
/// any other string is refused when decoding.
package enum RefusedOrderState: Codable, Sendable, Equatable, CustomStringConvertible {
    /// The order exists and is in this status.
    case status(OrderStatus)
    /// No order has the id (or the id is not one), `Unknown` on the wire.
    case noSuchOrder

    /// The string `noSuchOrder` travels as.
    package static let noSuchOrderValue = "Unknown"

    /// The string on the wire.
    package var description: String {
        switch self {
        case .status(let status): status.rawValue
        case .noSuchOrder: Self.noSuchOrderValue
        }
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        if text == Self.noSuchOrderValue {
            self = .noSuchOrder
        } else if let status = OrderStatus(rawValue: text) {
            self = .status(status)
        } else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "expected an order status or '\(Self.noSuchOrderValue)', got '\(text)'")
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

package struct RiderArrivedAtStore: EventPayload {
    package static let eventType = "RiderArrivedAtStore"
    package static let topic = Topic.ordersEvents
    package var orderId: String
    package var customerId: String
    package var vendorId: String
    package var riderId: String
    package init(orderId: String, customerId: String, vendorId: String, riderId: String) {
        self.orderId = orderId
        self.customerId = customerId
        self.vendorId = vendorId
        self.riderId = riderId
    }
}

/// The pickup (RDR-016): tracking starts, the customer is told, the vendor's dashboard updates, the rider delivers.
package struct OrderPickedUp: EventPayload {
    package static let eventType = "OrderPickedUp"
    package static let topic = Topic.ordersEvents
    package var orderId: String
    package var customerId: String
    package var vendor: VendorRef
    package var rider: PersonRef
    package var destination: Address
    package var pickedUpAt: Date
    package init(
        orderId: String, customerId: String, vendor: VendorRef, rider: PersonRef, destination: Address,
        pickedUpAt: Date
    ) {
        self.orderId = orderId
        self.customerId = customerId
        self.vendor = vendor
        self.rider = rider
        self.destination = destination
        self.pickedUpAt = pickedUpAt
    }
}

package struct OrderDelivered: EventPayload {
    package static let eventType = "OrderDelivered"
    package static let topic = Topic.ordersEvents
    package var orderId: String
    package var customerId: String
    package var vendorId: String
    package var riderId: String
    package var deliveredAt: Date
    package init(orderId: String, customerId: String, vendorId: String, riderId: String, deliveredAt: Date) {
        self.orderId = orderId
        self.customerId = customerId
        self.vendorId = vendorId
        self.riderId = riderId
        self.deliveredAt = deliveredAt
    }
}

package struct OrderCancelled: EventPayload {
    package static let eventType = "OrderCancelled"
    package static let topic = Topic.ordersEvents
    package var orderId: String
    package var customerId: String
    package var vendorId: String
    /// The rider assigned when it was cancelled, if any.
    package var riderId: String?
    package var cancelledBy: Role
    package var reason: String?
    package init(
        orderId: String, customerId: String, vendorId: String, riderId: String?, cancelledBy: Role, reason: String?
    ) {
        self.orderId = orderId
        self.customerId = customerId
        self.vendorId = vendorId
        self.riderId = riderId
        self.cancelledBy = cancelledBy
        self.reason = reason
    }
}

// Service requests (US-072): a technician visits a customer.

/// A service request's status.
package enum ServiceRequestStatus: String, Codable, Sendable, CaseIterable {
    case requested = "Requested"
    case technicianAssigned = "TechnicianAssigned"
    case onTheWay = "OnTheWay"
    case workInProgress = "WorkInProgress"
    case completed = "Completed"
    case cancelled = "Cancelled"
}

package struct ServiceRequestCreated: EventPayload {
    package static let eventType = "ServiceRequestCreated"
    package static let topic = Topic.ordersEvents
    package var requestId: String
    package var customerId: String
    package var serviceAddress: Address
    package var description: String
    package init(requestId: String, customerId: String, serviceAddress: Address, description: String) {
        self.requestId = requestId
        self.customerId = customerId
        self.serviceAddress = serviceAddress
        self.description = description
    }
}

package struct ServiceRequestAssigned: EventPayload {
    package static let eventType = "ServiceRequestAssigned"
    package static let topic = Topic.ordersEvents
    package var requestId: String
    package var customerId: String
    package var technician: PersonRef
    package var serviceAddress: Address
    package init(requestId: String, customerId: String, technician: PersonRef, serviceAddress: Address) {
        self.requestId = requestId
        self.customerId = customerId
        self.technician = technician
        self.serviceAddress = serviceAddress
    }
}

/// The technician moved the request on (OnTheWay, WorkInProgress, Completed) or it was cancelled.
package struct ServiceRequestStatusChanged: EventPayload {
    package static let eventType = "ServiceRequestStatusChanged"
    package static let topic = Topic.ordersEvents
    package var requestId: String
    package var customerId: String
    package var technician: PersonRef?
    package var status: ServiceRequestStatus
    package var serviceAddress: Address
    package init(
        requestId: String, customerId: String, technician: PersonRef?, status: ServiceRequestStatus,
        serviceAddress: Address
    ) {
        self.requestId = requestId
        self.customerId = customerId
        self.technician = technician
        self.status = status
        self.serviceAddress = serviceAddress
    }
}
