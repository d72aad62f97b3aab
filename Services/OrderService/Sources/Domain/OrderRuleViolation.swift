import Contracts

/// Why a transition is refused; the routes map each to its HTTP answer.
package enum OrderRuleViolation: Error, Equatable, Sendable {
    /// The actor is not a party allowed to do this (403 FORBIDDEN).
    case forbidden(String)
    /// A rider action by someone other than the assigned rider (403 NOT_ASSIGNED_RIDER).
    case notAssignedRider
    /// The order is cancelled (409 ORDER_CANCELLED).
    case cancelled
    /// The order is in another state (409 ORDER_STATE_CONFLICT naming it).
    case stateConflict(current: OrderStatus, allowed: [OrderStatus])
    /// Pickup before the rider confirmed arrival at the store (409 RIDER_NOT_ARRIVED).
    case riderNotArrived
    /// Delivering a prepaid order that needs photo proof without one (422 PROOF_PHOTO_REQUIRED).
    case proofPhotoRequired
}
