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
    /// `TRACKING_TICK_MS`, default 1000: how often staleness and the time limit are checked while jobs are tracked
    /// or positions arrive.
    package var tick: Duration
    /// `TRACKING_IDLE_TICK_MS`, default 5000: how often otherwise.
    package var idleTick: Duration
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
        idleTick = try environment.milliseconds("TRACKING_IDLE_TICK_MS", default: .seconds(5), in: 50...600_000)
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
