import Contracts
import Foundation
import ServiceKit

/// Why allocation refuses a rider's request; the edges answer each with its HTTP status and code.
package enum AllocationRuleViolation: Error, Equatable, Sendable {
    /// No such offer for this rider (another rider's offer is not found either).
    case offerNotFound(String)
    /// The offer's deadline passed (it timed out, or the rider was recorded unreachable).
    case offerExpired
    /// The order was cancelled while the offer was pending.
    case offerRescinded
    /// The offer was already answered.
    case offerNotPending(OfferStatus)
    /// Availability cannot change during a delivery.
    case riderOnDelivery(orderId: String?)
    /// Going online needs a precise, fresh fix (RDR-020).
    case preciseLocationRequired(accuracyMeters: Double, maxAgeSeconds: Int64)
    /// Allocation has not seen the order (it is not ready for pickup yet, or does not exist).
    case allocationNotFound(orderId: String)
    /// An operator cannot re-assign or release an order that was picked up or ended.
    case notReassignable(AllocationStatus)
    /// An operator can give an order only to an Online rider who holds no offer or order.
    case riderNotAvailable(riderId: String, RiderStatus?)
    /// An operator can release only an order that has a rider.
    case noRiderAssigned
}
