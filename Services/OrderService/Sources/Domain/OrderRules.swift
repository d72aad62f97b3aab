import Contracts

/// What the order service knows of an order when it decides a transition.
package struct OrderSnapshot: Sendable, Equatable {
    package var status: OrderStatus
    package var customerId: String
    package var vendorId: String
    package var rider: PersonRef?
    package var riderArrived: Bool
    package var paymentMode: PaymentMode
    package var requiresPhotoProof: Bool
    package var hasProofPhoto: Bool

    package init(
        status: OrderStatus, customerId: String, vendorId: String, rider: PersonRef? = nil, riderArrived: Bool = false,
        paymentMode: PaymentMode = .prepaid, requiresPhotoProof: Bool = false, hasProofPhoto: Bool = false
    ) {
        self.status = status
        self.customerId = customerId
        self.vendorId = vendorId
        self.rider = rider
        self.riderArrived = riderArrived
        self.paymentMode = paymentMode
        self.requiresPhotoProof = requiresPhotoProof
        self.hasProofPhoto = hasProofPhoto
    }
}

/// What can be asked of an order.
package enum OrderAction: Sendable, Equatable {
    case accept
    case markReady
    case arrive
    case pickUp
    case deliver
    case cancel
    case uploadProofPhoto
    /// Allocation's accepted offer or an operator's choice (no actor: the system).
    case assignRider(PersonRef)
    /// An operator took the order back to allocation before pickup (no actor: the system).
    case unassignRider
}

/// The order lifecycle: PendingVendorAcceptance -> Preparing -> ReadyForPickup -> InTransit -> Delivered, and
/// Cancelled from any non-final state; who may do what, and when. Pure: no I/O.
package enum OrderRules {
    /// The order after `action` by `actor`, or why not.
    package static func apply(_ action: OrderAction, to order: OrderSnapshot, by actor: OrderActor?)
        throws(OrderRuleViolation)
        -> OrderSnapshot
    {
        var next = order
        switch action {
        case .accept:
            try requireVendor(actor, of: order)
            try require(order, in: [.pendingVendorAcceptance])
            next.status = .preparing
        case .markReady:
            try requireVendor(actor, of: order)
            try require(order, in: [.preparing])
            next.status = .readyForPickup
        case .arrive:
            try requireAssignedRider(actor, of: order)
            try require(order, in: [.preparing, .readyForPickup])
            guard !order.riderArrived else {
                throw .stateConflict(current: order.status, allowed: [.preparing, .readyForPickup])
            }
            next.riderArrived = true
        case .pickUp:
            try requireAssignedRider(actor, of: order)
            try require(order, in: [.readyForPickup])
            guard order.riderArrived else { throw .riderNotArrived }
            next.status = .inTransit
        case .deliver:
            try requireAssignedRider(actor, of: order)
            try require(order, in: [.inTransit])
            if order.paymentMode == .prepaid, order.requiresPhotoProof, !order.hasProofPhoto {
                throw .proofPhotoRequired
            }
            next.status = .delivered
        case .uploadProofPhoto:
            try requireAssignedRider(actor, of: order)
            try require(order, in: [.inTransit])
            next.hasProofPhoto = true
        case .cancel:
            guard let actor else { throw .forbidden("cancelling needs a user") }
            switch actor.role {
            case .admin:
                // Support may cancel an order on its way too.
                try require(order, in: [.pendingVendorAcceptance, .preparing, .readyForPickup, .inTransit])
            case .vendor where actor.id == order.vendorId, .customer where actor.id == order.customerId:
                // The customer and the vendor cancel only before the rider has the order: a cancel racing the
                // pickup loses or wins on the order's version (the one that writes second finds it changed), never
                // both.
                try require(order, in: [.pendingVendorAcceptance, .preparing, .readyForPickup])
            default:
                throw .forbidden("only the order's customer, its vendor or an admin may cancel it")
            }
            next.status = .cancelled
        case .assignRider(let rider):
            try require(order, in: [.preparing, .readyForPickup])
            if order.rider?.id != rider.id { next.riderArrived = false }
            next.rider = rider
        case .unassignRider:
            try require(order, in: [.preparing, .readyForPickup])
            next.rider = nil
            next.riderArrived = false
        }
        return next
    }

    private static func require(_ order: OrderSnapshot, in allowed: [OrderStatus]) throws(OrderRuleViolation) {
        guard allowed.contains(order.status) else {
            if order.status == .cancelled { throw .cancelled }
            throw .stateConflict(current: order.status, allowed: allowed)
        }
    }

    private static func requireVendor(_ actor: OrderActor?, of order: OrderSnapshot) throws(OrderRuleViolation) {
        guard let actor, actor.role == .vendor, actor.id == order.vendorId else {
            throw .forbidden("only the order's vendor may do this")
        }
    }

    private static func requireAssignedRider(_ actor: OrderActor?, of order: OrderSnapshot) throws(OrderRuleViolation) {
        guard let actor, actor.role == .rider else { throw .forbidden("only the assigned rider may do this") }
        guard order.rider?.id == actor.id else { throw .notAssignedRider }
    }
}
