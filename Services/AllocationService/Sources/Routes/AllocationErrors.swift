import Contracts
import ServiceKit

/// How the HTTP and socket edges answer allocation's refusals.
extension AllocationRuleViolation: APIErrorConvertible {
    package var apiError: APIError {
        switch self {
        case .offerNotFound(let offerId):
            .notFound("no offer \(offerId) for you")
        case .offerExpired:
            .conflict(.offerExpired, "the offer expired")
        case .offerRescinded:
            .conflict(.offerRescinded, "This offer is no longer available")
        case .offerNotPending(let status):
            .conflict(
                .offerNotPending, "the offer was already \(status.rawValue)", details: ["status": status.rawValue])
        case .riderOnDelivery(let orderId):
            .conflict(.riderOnDelivery, "finish the current delivery first", details: ["orderId": orderId ?? ""])
        case .preciseLocationRequired(let accuracyMeters, let maxAgeSeconds):
            .unprocessable(
                .preciseLocationRequired,
                "going online needs a precise location (accuracy within \(Int(accuracyMeters)) m, at most \(maxAgeSeconds) s old)"
            )
        case .allocationNotFound(let orderId):
            .notFound("allocation has no order \(orderId) (it is offered to riders once it is ready for pickup)")
        case .notReassignable(let status):
            .conflict(
                .orderNotReassignable,
                "the order is \(status.rawValue.replacingOccurrences(of: "_", with: " ")): only an order not yet picked up can change rider",
                details: ["status": status.rawValue])
        case .riderNotAvailable(let riderId, let status):
            .conflict(
                .riderNotAvailable,
                "rider \(riderId) is \(status?.rawValue ?? "unknown"): only an Online rider without an offer or order can be assigned",
                details: ["riderId": riderId, "status": status?.rawValue ?? "unknown"])
        case .noRiderAssigned:
            .conflict(.noRiderAssigned, "the order has no rider to release")
        }
    }
}
