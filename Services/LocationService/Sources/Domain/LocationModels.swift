import Contracts
import Foundation
import Hummingbird
import ServiceKit

/// Location's settings, from the environment.
package struct LocationSettings: Sendable {
    /// `TRACKING_STALE_AFTER_SECONDS`, default 30: a live job with no position for that long is stale.
    package var staleAfter: Duration
    /// `TRACKING_MAX_SECONDS`, default 14400 (4 h): travel mode (and a delivery's tracking) ends by itself then.
    package var maximumTracking: Duration
    /// `TRACKING_TICK_MS`, default 1000: how often staleness and the time limit are checked.
    package var tick: Duration
    /// `POSITION_RATE_PER_SECOND` (default 5) and `POSITION_RATE_BURST` (default 20): per courier.
    package var positionRate: Double
    package var positionBurst: Int
    /// `POSITION_PUBLISH_INTERVAL_SECONDS`, default 3: couriers.positions gets at most one position per courier
    /// this often.
    package var publishInterval: Duration
    /// `POSITION_MAX_AGE_SECONDS`, default 600: older positions (a device's clock, or a queue replayed too late)
    /// are refused; a position more than `POSITION_MAX_FUTURE_SECONDS` (default 30) ahead is refused too.
    package var positionMaximumAge: Duration
    package var positionMaximumFuture: Duration
    /// `POSITION_MAX_ACCURACY_METERS`, default 100: a coarser position is neither shown nor passed on.
    package var positionMaximumAccuracyMeters: Double
    /// `POSITION_MAX_SPEED_MPS`, default 70 (252 km/h): a position that would mean moving faster from the last one
    /// is a GPS jump, dropped.
    package var positionMaximumSpeedMps: Double
    /// `ETA_REFRESH_SECONDS`, default 30 (at most 60): the ETA is recomputed this often while the job is live
    /// (from the tick, even when no position arrived), and at once after a move of `ETA_SIGNIFICANT_MOVE_METERS`
    /// (default 300).
    package var etaRefresh: Duration
    package var etaSignificantMoveMeters: Double
    /// `ETA_PROVIDER`: `estimator` (default), `osrm` or `azure`, with `ETA_PROVIDER_URL` (OSRM's or Azure Maps'
    /// base URL), `AZURE_MAPS_KEY`, `ETA_PROVIDER_TIMEOUT_MS` (2000), `ETA_BREAKER_FAILURES` (5) and
    /// `ETA_BREAKER_OPEN_SECONDS` (30).
    package var provider: EtaProviderKind
    package var providerURL: URL?
    package var azureMapsKey: String?
    package var providerTimeout: Duration
    package var breakerFailures: Int
    package var breakerOpen: Duration
    /// `ETA_ROAD_FACTOR` (default 1.3) and `ETA_DEFAULT_SPEED_KMH` (default 22): the built-in estimator's road
    /// distance over the great circle, and its speed until one is learned from the courier's positions.
    package var roadFactor: Double
    package var defaultSpeedMps: Double

    package init(environment: ServiceEnvironment) throws(ConfigurationError) {
        staleAfter = try environment.seconds("TRACKING_STALE_AFTER_SECONDS", default: .seconds(30), in: 1...3600)
        maximumTracking = try environment.seconds("TRACKING_MAX_SECONDS", default: .seconds(4 * 3600), in: 1...86_400)
        tick = try environment.milliseconds("TRACKING_TICK_MS", default: .seconds(1), in: 50...60_000)
        positionRate = try environment.double("POSITION_RATE_PER_SECOND", default: 5, in: 0.1...1000)
        positionBurst = try environment.int("POSITION_RATE_BURST", default: 20, in: 1...10_000)
        publishInterval = try environment.seconds(
            "POSITION_PUBLISH_INTERVAL_SECONDS", default: .seconds(3), in: 0...3600)
        positionMaximumAge = try environment.seconds("POSITION_MAX_AGE_SECONDS", default: .seconds(600), in: 1...86_400)
        positionMaximumFuture = try environment.seconds(
            "POSITION_MAX_FUTURE_SECONDS", default: .seconds(30), in: 0...3600)
        positionMaximumAccuracyMeters = try environment.double(
            "POSITION_MAX_ACCURACY_METERS", default: 100, in: 1...10_000)
        positionMaximumSpeedMps = try environment.double("POSITION_MAX_SPEED_MPS", default: 70, in: 1...100_000)
        etaRefresh = try environment.seconds("ETA_REFRESH_SECONDS", default: .seconds(30), in: 1...60)
        etaSignificantMoveMeters = try environment.double("ETA_SIGNIFICANT_MOVE_METERS", default: 300, in: 1...100_000)
        provider = try environment.choice("ETA_PROVIDER", default: EtaProviderKind.estimator)
        providerURL = try environment.url("ETA_PROVIDER_URL", meaning: "the routing service's base URL")
        azureMapsKey = environment.optional("AZURE_MAPS_KEY")
        providerTimeout = try environment.milliseconds("ETA_PROVIDER_TIMEOUT_MS", default: .seconds(2), in: 50...60_000)
        breakerFailures = try environment.int("ETA_BREAKER_FAILURES", default: 5, in: 1...1_000_000)
        breakerOpen = try environment.seconds("ETA_BREAKER_OPEN_SECONDS", default: .seconds(30), in: 1...3600)
        roadFactor = try environment.double("ETA_ROAD_FACTOR", default: 1.3, in: 1...5)
        defaultSpeedMps = try environment.double("ETA_DEFAULT_SPEED_KMH", default: 22, in: 1...200) / 3.6
        if provider != .estimator, providerURL == nil {
            throw ConfigurationError(
                variable: "ETA_PROVIDER_URL", problem: "required with ETA_PROVIDER=\(provider.rawValue)")
        }
        if provider == .azure, azureMapsKey == nil {
            throw ConfigurationError(variable: "AZURE_MAPS_KEY", problem: "required with ETA_PROVIDER=azure")
        }
    }
}

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
