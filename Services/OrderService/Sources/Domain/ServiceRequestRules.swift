import Contracts

/// A technician visit: Requested -> TechnicianAssigned -> OnTheWay -> WorkInProgress -> Completed, or Cancelled.
package struct ServiceRequestSnapshot: Sendable, Equatable {
    package var status: ServiceRequestStatus
    package var customerId: String
    package var technician: PersonRef?

    package init(status: ServiceRequestStatus, customerId: String, technician: PersonRef? = nil) {
        self.status = status
        self.customerId = customerId
        self.technician = technician
    }
}

/// What can be asked of a service request.
package enum ServiceRequestAction: Sendable, Equatable {
    /// An admin assigns (or re-assigns, before the technician set off) a technician.
    case assign(PersonRef)
    /// The assigned technician reports progress: OnTheWay, WorkInProgress or Completed, in that order.
    case advance(to: ServiceRequestStatus)
    case cancel
}

/// The service-request lifecycle and who may move it. Pure.
package enum ServiceRequestRules {
    package static func apply(
        _ action: ServiceRequestAction, to request: ServiceRequestSnapshot, by actor: OrderActor
    ) throws(ServiceRequestRuleViolation) -> ServiceRequestSnapshot {
        var next = request
        switch action {
        case .assign(let technician):
            guard actor.role == .admin else { throw .forbidden("only an admin assigns technicians") }
            try require(request, in: [.requested, .technicianAssigned])
            next.technician = technician
            next.status = .technicianAssigned
        case .advance(let status):
            guard actor.role == .technician, request.technician?.id == actor.id else {
                throw .forbidden("only the assigned technician reports progress")
            }
            let previous: ServiceRequestStatus
            switch status {
            case .onTheWay: previous = .technicianAssigned
            case .workInProgress: previous = .onTheWay
            case .completed: previous = .workInProgress
            default: throw .stateConflict(current: request.status, allowed: [])
            }
            try require(request, in: [previous])
            next.status = status
        case .cancel:
            guard actor.role == .admin || (actor.role == .customer && actor.id == request.customerId) else {
                throw .forbidden("only the customer or an admin cancels a service request")
            }
            try require(request, in: [.requested, .technicianAssigned, .onTheWay])
            next.status = .cancelled
        }
        return next
    }

    private static func require(_ request: ServiceRequestSnapshot, in allowed: [ServiceRequestStatus])
        throws(ServiceRequestRuleViolation)
    {
        guard allowed.contains(request.status) else { throw .stateConflict(current: request.status, allowed: allowed) }
    }
}
