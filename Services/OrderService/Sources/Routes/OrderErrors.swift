import Contracts
import Foundation
import ServiceKit

/// How the HTTP and socket edges answer a refused order transition.
extension OrderRuleViolation: APIErrorConvertible {
    package var apiError: APIError {
        switch self {
        case .forbidden(let message):
            APIError.forbidden(message)
        case .notAssignedRider:
            APIError.forbidden("you are not the rider assigned to this order", code: .notAssignedRider)
        case .cancelled:
            APIError.conflict(
                .orderCancelled, "the order was cancelled", details: ["currentState": OrderStatus.cancelled.rawValue])
        case .stateConflict(let current, let allowed):
            APIError.conflict(
                .orderStateConflict,
                "the order is \(current.rawValue); this needs "
                    + (allowed.isEmpty ? "another state" : allowed.map(\.rawValue).joined(separator: " or ")),
                details: ["currentState": current.rawValue]
            )
        case .riderNotArrived:
            APIError.conflict(
                .riderNotArrived, "confirm arrival at the store before the pickup",
                details: ["currentState": OrderStatus.readyForPickup.rawValue]
            )
        case .proofPhotoRequired:
            APIError.unprocessable(
                .proofPhotoRequired, "this prepaid order needs a photo proof of delivery before it is delivered")
        }
    }
}

/// How the HTTP edge answers a refused service-request transition.
extension ServiceRequestRuleViolation: APIErrorConvertible {
    package var apiError: APIError {
        switch self {
        case .forbidden(let message):
            .forbidden(message)
        case .stateConflict(let current, let allowed):
            .conflict(
                .serviceRequestStateConflict,
                "the request is \(current.rawValue); this needs " + allowed.map(\.rawValue).joined(separator: " or "),
                details: ["currentState": current.rawValue]
            )
        }
    }
}

/// How the HTTP edge answers a missing or duplicate record.
extension OrderRecordError: APIErrorConvertible {
    package var apiError: APIError {
        switch self {
        case .noOrder(let id): .notFound("no order \(id)")
        case .noServiceRequest(let id): .notFound("no service request \(id)")
        case .vendorExists(let id): .conflict(.alreadyExists, "vendor \(id) already exists")
        }
    }
}
