import Contracts
import Foundation
import Hummingbird
import ServiceKit

// The service's value types, kept together: each is a few lines and they are read together.

/// A position fix from a courier's device, as received.
package struct CourierPosition: Codable, Sendable, Equatable {
    package var lat: Double
    package var lng: Double
    package var accuracyMeters: Double
    package var headingDegrees: Double?
    package var speedMps: Double?
    package var recordedAt: Date

    package init(
        lat: Double, lng: Double, accuracyMeters: Double, headingDegrees: Double?, speedMps: Double?, recordedAt: Date
    ) {
        self.lat = lat
        self.lng = lng
        self.accuracyMeters = accuracyMeters
        self.headingDegrees = headingDegrees
        self.speedMps = speedMps
        self.recordedAt = recordedAt
    }

    package var point: GeoPoint { GeoPoint(lat: lat, lng: lng) }
}

/// What a watcher sees of a job: live, waiting for the technician's travel mode, stale, or ended (or not started).
package enum TrackingState: String, Codable, Sendable, CaseIterable {
    case notStarted = "not_started"
    case waitingForTravelMode = "waiting_for_travel_mode"
    case live
    case stale
    case ended

    /// Whether the courier's location is shared with the customer (BR-001).
    package var sharesLocation: Bool { self == .live || self == .stale }
}

/// Where a job is heading.
package struct Destination: Codable, Sendable, Equatable {
    package var lat: Double
    package var lng: Double
    package var label: String
    package var point: GeoPoint { GeoPoint(lat: lat, lng: lng) }

    package init(lat: Double, lng: Double, label: String) {
        self.lat = lat
        self.lng = lng
        self.label = label
    }
}

/// How far a job has got, as orders.events tells it.
package enum JobPhase: String, Codable, Sendable {
    /// Created or assigned, not under way yet.
    case pending
    /// Picked up (a delivery) or on the way (a service request).
    case travelling
    case finished
}

/// A tracked job as Location keeps it: no position in it, only who, where to, and the state.
package struct TrackingJob: Sendable, Equatable {
    package var jobId: String
    package var kind: JobKind
    package var customerId: String
    package var courierId: String?
    package var destination: Destination
    package var phase: JobPhase
    package var state: TrackingState
    package var endReason: TrackingStopReason?
    package var travelMode: Bool
    package var travelModeSince: Date?
    package var trackingStartedAt: Date?
    /// Counts the job's changes (0 when created): apps keep the newest of what reaches them.
    package var version = 0

    package init(jobId: String, kind: JobKind, customerId: String, courierId: String?, destination: Destination) {
        self.jobId = jobId
        self.kind = kind
        self.customerId = customerId
        self.courierId = courierId
        self.destination = destination
        self.phase = .pending
        self.state = .notStarted
        self.travelMode = false
    }

    /// The sentence watchers see for the job's state.
    package var message: String {
        let courier = kind == .delivery ? "Your rider" : "Technician"
        switch state {
        case .notStarted:
            return kind == .delivery
                ? "Live tracking starts when the rider picks up your order."
                : "Live location will be available once the technician is on the way."
        case .waitingForTravelMode:
            return "Technician is on the way. Live location will be available once the technician enables it."
        case .live:
            return "\(courier) is on the way."
        case .stale:
            return "ETA recalculating"
        case .ended:
            switch endReason {
            case .arrived: return "The technician has arrived."
            case .delivered: return "Your order has been delivered."
            case .cancelled: return "This job was cancelled."
            case .travelModeOff: return "The technician has stopped sharing their location."
            case .timeLimit: return "Live location sharing ended after the time limit."
            case .completed, nil: return "Tracking has ended."
            }
        }
    }
}

/// The `tracking_status` event and the state part of the `track` acknowledgement.
package struct TrackingStatus: Codable, Sendable, Equatable {
    package var jobId: String
    package var state: TrackingState
    package var message: String
    package var lastUpdatedAt: Date?
    /// The job's ``TrackingJob/version``: an app ignores a status or view older than one it has.
    package var version: Int

    package init(_ job: TrackingJob, lastUpdatedAt: Date?) {
        self.jobId = job.jobId
        self.state = job.state
        self.message = job.message
        self.lastUpdatedAt = lastUpdatedAt
        self.version = job.version
    }
}

/// The `location` event.
package struct LocationUpdate: Codable, Sendable, Equatable {
    package var jobId: String
    package var lat: Double
    package var lng: Double
    package var headingDegrees: Double?
    package var recordedAt: Date
}

/// The `track` acknowledgement (and `GET /v1/tracking/{jobId}`): everything a map needs to draw at once.
package struct TrackingView: Codable, Sendable, Equatable, ResponseEncodable {
    package var jobId: String
    package var kind: JobKind
    package var state: TrackingState
    package var message: String
    package var lastUpdatedAt: Date?
    package var lastLocation: LocationUpdate?
    package var destination: Destination
    package var eta: EtaUpdate?
    package var travelMode: Bool
    /// The job's ``TrackingJob/version``.
    package var version: Int
}

/// What became of one position of a queued batch (`POST /v1/couriers/me/positions`).
package enum PositionOutcome: String, Codable, Sendable, Equatable {
    /// The courier's newest position at the time: shown and used.
    case applied
    /// Not newer than the courier's last position (already sent, or overtaken): nothing changed.
    case olderThanLast = "older_than_last"
    /// Recorded longer ago than `POSITION_MAX_AGE_SECONDS`: dropped.
    case tooOld = "too_old"
    /// Coarser than `POSITION_MAX_ACCURACY_METERS`: dropped.
    case inaccurate
    /// Farther from the last position than `POSITION_MAX_SPEED_MPS` allows in the time between them: dropped.
    case implausibleJump = "implausible_jump"
}
