import Contracts
import Foundation

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
