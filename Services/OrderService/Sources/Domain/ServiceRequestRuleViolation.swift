import Contracts

/// Why a service-request transition is refused.
package enum ServiceRequestRuleViolation: Error, Equatable, Sendable {
    case forbidden(String)
    case stateConflict(current: ServiceRequestStatus, allowed: [ServiceRequestStatus])
}
