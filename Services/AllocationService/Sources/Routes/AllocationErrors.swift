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
        }
    }
}
