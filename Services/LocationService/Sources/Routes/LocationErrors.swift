import Contracts
import ServiceKit

/// How the HTTP and socket edges answer Location's refusals.
extension LocationRuleViolation: APIErrorConvertible {
    package var apiError: APIError {
        switch self {
        case .invalidPosition(let problem):
            .validation(problem)
        case .notCourier:
            .forbidden("only riders and technicians send positions")
        case .positionRateLimited(let perSecond):
            APIError(.tooManyRequests, code: .rateLimited, message: "at most \(perSecond) positions a second")
        case .jobNotFound(let jobId, kind: .serviceRequest):
            .notFound("no service request \(jobId)")
        case .jobNotFound(let jobId, kind: _):
            .notFound("no tracked job \(jobId)")
        case .notAssignedTechnician:
            .forbidden("only the technician assigned to this service request switches its travel mode")
        case .notJobCustomer:
            .forbidden("only the customer of this job may watch it")
        }
    }
}
