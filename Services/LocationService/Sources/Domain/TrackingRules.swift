import Contracts
import Foundation
import ServiceKit

/// A change in whether a job is tracked, to announce on tracking.events.
package enum TrackingChange: Sendable, Equatable {
    case started
    case stopped(TrackingStopReason)
}

extension TrackingJob {
    /// Brings `state` in line with the phase and travel mode after a change, and says whether tracking started or
    /// stopped. A delivery is tracked while travelling; a service request while travelling with travel mode on
    /// (without it: waiting for travel mode, or ended if `reason` says it was switched off). `reason` is why a
    /// tracked job stops.
    package mutating func settle(now: Date, reason: TrackingStopReason? = nil) -> TrackingChange? {
        let wasTracked = state.sharesLocation
        let tracked: Bool
        var idle: TrackingState
        switch phase {
        case .pending:
            tracked = false
            idle = .notStarted
        case .finished:
            tracked = false
            idle = .ended
        case .travelling:
            tracked = kind == .delivery || travelMode
            idle = reason == .travelModeOff || reason == .timeLimit ? .ended : .waitingForTravelMode
        }
        if tracked {
            guard !wasTracked else { return nil }
            state = .live
            endReason = nil
            trackingStartedAt = now
            return .started
        }
        if idle == .ended { endReason = reason ?? endReason ?? .completed }
        state = idle
        return wasTracked ? .stopped(endReason ?? reason ?? .completed) : nil
    }
}

/// Why Location refused a request; the HTTP and socket edges answer each with its status and code
/// (`Routes/LocationErrors.swift`).
package enum LocationRuleViolation: Error, Equatable, Sendable {
    /// A position out of range or out of time, with the sentence naming the field.
    case invalidPosition(String)
    /// Only riders and technicians send positions.
    case notCourier
    /// More positions a second than the courier's limit.
    case positionRateLimited(perSecond: Double)
    /// No tracked job (or no service request, for travel mode) with this id.
    case jobNotFound(String, kind: JobKind?)
    /// Travel mode belongs to the technician assigned to the service request.
    case notAssignedTechnician
    /// Only the job's own customer watches it (BR-001).
    case notJobCustomer
}

/// Location's decisions, pure: what a position must be, when a job is stale or overdue, who may do what, and
/// the push a technician gets when travel mode ends by itself.
package enum TrackingRules {
    /// Checks a position's ranges, and its time against `now` (neither too old nor ahead).
    package static func validate(_ position: CourierPosition, now: Date, settings: LocationSettings)
        throws(LocationRuleViolation)
    {
        if let problem = Validate.coordinateProblem(lat: position.lat, lng: position.lng, "position") {
            throw .invalidPosition(problem)
        }
        if let problem = Validate.accuracyProblem(position.accuracyMeters, "accuracyMeters") {
            throw .invalidPosition(problem)
        }
        if let heading = position.headingDegrees, !(heading.isFinite && heading >= 0 && heading < 360) {
            throw .invalidPosition("'headingDegrees' must be at least 0 and under 360")
        }
        if let speed = position.speedMps, !(speed.isFinite && (0...100).contains(speed)) {
            throw .invalidPosition("'speedMps' must be between 0 and 100")
        }
        guard position.recordedAt <= now + settings.positionMaximumFuture else {
            throw .invalidPosition("'recordedAt' is in the future")
        }
        guard !isTooOld(position, now: now, settings: settings) else {
            throw .invalidPosition("'recordedAt' is older than \(settings.positionMaximumAge.components.seconds) s")
        }
    }

    /// Why a valid position is not used after `last` (the courier's newest): not newer, too coarse, or too far
    /// to have been travelled in the time between them; `nil` if it is used.
    package static func screen(_ position: CourierPosition, after last: CourierPosition?, settings: LocationSettings)
        -> PositionOutcome?
    {
        if let last, last.recordedAt >= position.recordedAt { return .olderThanLast }
        if position.accuracyMeters > settings.positionMaximumAccuracyMeters { return .inaccurate }
        if let last {
            let seconds = position.recordedAt.timeIntervalSince(last.recordedAt)
            if last.point.meters(to: position.point) > settings.positionMaximumSpeedMps * seconds {
                return .implausibleJump
            }
        }
        return nil
    }

    /// Whether a position was recorded longer ago than `POSITION_MAX_AGE_SECONDS` before `now`: too old to show.
    package static func isTooOld(_ position: CourierPosition, now: Date, settings: LocationSettings) -> Bool {
        position.recordedAt < now - settings.positionMaximumAge
    }

    /// Whether a live job's courier has been silent too long: nothing heard (or tracking started) within
    /// `staleAfter` before `now`.
    package static func isSilent(_ job: TrackingJob, lastHeard: Date?, now: Date, staleAfter: Duration) -> Bool {
        guard job.state == .live else { return false }
        let heard = lastHeard ?? job.trackingStartedAt ?? now
        let since = max(heard, job.trackingStartedAt ?? heard)
        return now > since + staleAfter
    }

    /// Travel mode may be switched only on a service request, by its assigned technician.
    package static func requireTravelModeSwitch(_ job: TrackingJob?, jobId: String, by technicianId: String)
        throws(LocationRuleViolation) -> TrackingJob
    {
        guard let job, job.kind == .serviceRequest else { throw .jobNotFound(jobId, kind: .serviceRequest) }
        guard job.courierId == technicianId else { throw .notAssignedTechnician }
        return job
    }

    /// Only the job's customer may watch it.
    package static func requireWatcher(_ job: TrackingJob?, jobId: String, customer: Identity)
        throws(LocationRuleViolation) -> TrackingJob
    {
        guard let job else { throw .jobNotFound(jobId, kind: nil) }
        guard customer.role == .customer, job.customerId == customer.userId else { throw .notJobCustomer }
        return job
    }

    /// The push a technician gets when travel mode ended after `maximumTracking`.
    package static func travelModeOffPush(
        _ job: TrackingJob, technicianId: String, maximumTracking: Duration, now: Date
    ) -> PushRequested {
        PushRequested(
            notificationId: "travel-mode-off-\(job.jobId)-\(Int(now.timeIntervalSince1970))",
            userId: technicianId,
            kind: .travelModeOff, title: "Travel mode switched off",
            body:
                "Travel mode was on for \(spoken(maximumTracking)), so it was switched off. Switch it on again if you are still on the way.",
            data: ["link": "app://service-requests/\(job.jobId)", "jobId": job.jobId], priority: .high,
            collapseKey: nil, ttlSeconds: 3600, sound: nil, correlationId: job.jobId
        )
    }

    /// A limit as the push says it: whole hours ("4 hours", "1 hour"), else minutes rounded up ("2 minutes").
    static func spoken(_ limit: Duration) -> String {
        let seconds = limit.components.seconds
        if seconds >= 3600, seconds.isMultiple(of: 3600) {
            return seconds == 3600 ? "1 hour" : "\(seconds / 3600) hours"
        }
        let minutes = max(1, (seconds + 59) / 60)
        return minutes == 1 ? "1 minute" : "\(minutes) minutes"
    }
}
