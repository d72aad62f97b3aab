import Foundation

// One file per topic: the payloads published on allocation.events, which travel together.

// Events on allocation.events, keyed by order id.

package struct OfferSent: EventPayload {
    package static let eventType = "OfferSent"
    package static let topic = Topic.allocationEvents
    package var offerId: String
    package var orderId: String
    package var riderId: String
    package var expiresAt: Date
    package init(offerId: String, orderId: String, riderId: String, expiresAt: Date) {
        self.offerId = offerId
        self.orderId = orderId
        self.riderId = riderId
        self.expiresAt = expiresAt
    }
}

/// A rider accepted: Order assigns them (RiderAssigned) or refuses (RiderAssignmentRefused).
package struct OfferAccepted: EventPayload {
    package static let eventType = "OfferAccepted"
    package static let topic = Topic.allocationEvents
    package var offerId: String
    package var orderId: String
    package var rider: PersonRef
    package init(offerId: String, orderId: String, rider: PersonRef) {
        self.offerId = offerId
        self.orderId = orderId
        self.rider = rider
    }
}

/// Why an offer did not lead to an assignment.
package enum OfferRejectionReason: String, Codable, Sendable, CaseIterable {
    case rejected
    case timedOut = "timed_out"
    case unreachable
    case rescinded
}

package struct OfferRejected: EventPayload {
    package static let eventType = "OfferRejected"
    package static let topic = Topic.allocationEvents
    package var offerId: String
    package var orderId: String
    package var riderId: String
    package var reason: OfferRejectionReason
    package init(offerId: String, orderId: String, riderId: String, reason: OfferRejectionReason) {
        self.offerId = offerId
        self.orderId = orderId
        self.riderId = riderId
        self.reason = reason
    }
}

/// An operator (admin) gave the order to `rider` (CUS-032 8.2): Order assigns them in place of any rider it
/// has (RiderReassigned) or refuses (RiderAssignmentRefused), as for an accepted offer.
package struct OperatorAssignedRider: EventPayload {
    package static let eventType = "OperatorAssignedRider"
    package static let topic = Topic.allocationEvents
    package var orderId: String
    package var rider: PersonRef
    package var operatorId: String
    package init(orderId: String, rider: PersonRef, operatorId: String) {
        self.orderId = orderId
        self.rider = rider
        self.operatorId = operatorId
    }
}

/// An operator (admin) took the order away from its rider and back to allocation: Order unassigns the rider
/// (RiderUnassigned) while allocation offers the order again.
package struct OperatorReleasedOrder: EventPayload {
    package static let eventType = "OperatorReleasedOrder"
    package static let topic = Topic.allocationEvents
    package var orderId: String
    package var riderId: String
    package var operatorId: String
    package init(orderId: String, riderId: String, operatorId: String) {
        self.orderId = orderId
        self.riderId = riderId
        self.operatorId = operatorId
    }
}

/// Nobody eligible took the order this round; Allocation tries again at `nextAttemptAt`.
package struct AllocationFailed: EventPayload {
    package static let eventType = "AllocationFailed"
    package static let topic = Topic.allocationEvents
    package var orderId: String
    package var attempt: Int
    package var reason: String
    package var nextAttemptAt: Date?
    package init(orderId: String, attempt: Int, reason: String, nextAttemptAt: Date?) {
        self.orderId = orderId
        self.attempt = attempt
        self.reason = reason
        self.nextAttemptAt = nextAttemptAt
    }
}
