import Foundation

// One file per area's topics: the payloads published on couriers.positions and tracking.events, which travel together.

/// A courier's position, throttled, on couriers.positions keyed by courier id. Never stored in Postgres.
package struct PositionUpdated: EventPayload {
    package static let eventType = "PositionUpdated"
    package static let topic = Topic.couriersPositions
    package var courierId: String
    package var role: Role
    package var lat: Double
    package var lng: Double
    package var accuracyMeters: Double
    package var headingDegrees: Double?
    package var speedMps: Double?
    package var recordedAt: Date
    package init(
        courierId: String, role: Role, lat: Double, lng: Double, accuracyMeters: Double, headingDegrees: Double?,
        speedMps: Double?, recordedAt: Date
    ) {
        self.courierId = courierId
        self.role = role
        self.lat = lat
        self.lng = lng
        self.accuracyMeters = accuracyMeters
        self.headingDegrees = headingDegrees
        self.speedMps = speedMps
        self.recordedAt = recordedAt
    }
}

/// What is tracked: a delivery order or a technician's service request.
package enum JobKind: String, Codable, Sendable, CaseIterable {
    case delivery
    case serviceRequest = "service_request"
}

/// Live tracking of a job began (tracking.events, keyed by job id).
package struct TrackingStarted: EventPayload {
    package static let eventType = "TrackingStarted"
    package static let topic = Topic.trackingEvents
    package var jobId: String
    package var kind: JobKind
    package var customerId: String
    package var courierId: String
    package var startedAt: Date
    package init(jobId: String, kind: JobKind, customerId: String, courierId: String, startedAt: Date) {
        self.jobId = jobId
        self.kind = kind
        self.customerId = customerId
        self.courierId = courierId
        self.startedAt = startedAt
    }
}

/// Why tracking ended.
package enum TrackingStopReason: String, Codable, Sendable, CaseIterable {
    case delivered
    case cancelled
    case arrived
    case travelModeOff = "travel_mode_off"
    case timeLimit = "time_limit"
    case completed
}

package struct TrackingStopped: EventPayload {
    package static let eventType = "TrackingStopped"
    package static let topic = Topic.trackingEvents
    package var jobId: String
    package var kind: JobKind
    package var customerId: String
    package var courierId: String
    package var reason: TrackingStopReason
    package var stoppedAt: Date
    package init(
        jobId: String, kind: JobKind, customerId: String, courierId: String, reason: TrackingStopReason,
        stoppedAt: Date
    ) {
        self.jobId = jobId
        self.kind = kind
        self.customerId = customerId
        self.courierId = courierId
        self.reason = reason
        self.stoppedAt = stoppedAt
    }
}
