import Contracts
import Foundation
import Hummingbird
import ServiceKit

/// Allocation's settings, from the environment.
package struct AllocationSettings: Sendable {
    /// `OFFER_TIMEOUT_SECONDS`, default 60: how long a rider has to answer an offer.
    package var offerTimeout: Duration
    /// The offer timeout in whole seconds, as the rider's app and the push's time to live take it.
    package var offerTimeoutSeconds: Int { Int(offerTimeout.components.seconds) }
    /// `OFFER_RECEIPT_TIMEOUT_SECONDS`, default 10: an offer the rider's app has not confirmed receiving by then
    /// is recorded unreachable and the next rider is tried.
    package var receiptTimeout: Duration
    /// `OFFER_PUSH_GRACE_SECONDS`, default 20: for a rider without a live socket, how long past the receipt window
    /// an offer waits for its push to be accepted before the rider is recorded unreachable.
    package var pushGrace: Duration
    /// `ALLOCATION_RADIUS_KM`, default 5: riders farther from the vendor are not offered the order.
    package var radiusMeters: Double
    /// `PRECISE_LOCATION_ACCURACY_METERS` (default 50) and `PRECISE_LOCATION_MAX_AGE_SECONDS` (default 120): the
    /// fix a rider needs to go online (RDR-020).
    package var preciseAccuracyMeters: Double
    package var locationMaxAge: Duration
    /// `ALLOCATION_RETRY_INITIAL_MS` (default 2000) doubling up to `ALLOCATION_RETRY_MAX_SECONDS` (default 60):
    /// when nobody was eligible.
    package var retryInitial: Duration
    package var retryMaximum: Duration
    /// `ALLOCATION_TICK_MS`, default 250: how often deadlines and retries are checked at most, and how soon after
    /// activity (an event applied, a write request).
    package var tick: Duration
    /// `ALLOCATION_IDLE_TICK_MS`, default 5000: how long a quiet instance goes without checking when no deadline
    /// it knows of is due sooner (deadlines another instance wrote meanwhile, should it go away).
    package var idleTick: Duration
    /// How long a rider's socket counts as connected without its instance refreshing it.
    package var presenceFreshness: Duration = .seconds(90)
    /// `RIDER_OFFLINE_WITHOUT_FIX_SECONDS`, default 300: an Online rider whose last precise fix is older is taken
    /// Offline (BR-RDR-PERM-01).
    package var offlineWithoutFix: Duration

    package init(environment: ServiceEnvironment) throws(ConfigurationError) {
        offerTimeout = try environment.seconds("OFFER_TIMEOUT_SECONDS", default: .seconds(60), in: 1...3600)
        receiptTimeout = try environment.seconds("OFFER_RECEIPT_TIMEOUT_SECONDS", default: .seconds(10), in: 1...3600)
        pushGrace = try environment.seconds("OFFER_PUSH_GRACE_SECONDS", default: .seconds(20), in: 0...3600)
        radiusMeters = try environment.double("ALLOCATION_RADIUS_KM", default: 5, in: 0.1...500) * 1000
        preciseAccuracyMeters = try environment.double("PRECISE_LOCATION_ACCURACY_METERS", default: 50, in: 1...10_000)
        locationMaxAge = try environment.seconds(
            "PRECISE_LOCATION_MAX_AGE_SECONDS", default: .seconds(120), in: 1...86_400)
        retryInitial = try environment.milliseconds(
            "ALLOCATION_RETRY_INITIAL_MS", default: .seconds(2), in: 10...3_600_000)
        retryMaximum = try environment.seconds("ALLOCATION_RETRY_MAX_SECONDS", default: .seconds(60), in: 1...86_400)
        tick = try environment.milliseconds("ALLOCATION_TICK_MS", default: .milliseconds(250), in: 10...60_000)
        idleTick = try environment.milliseconds(
            "ALLOCATION_IDLE_TICK_MS", default: .seconds(5), in: 10...600_000)
        offlineWithoutFix = try environment.seconds(
            "RIDER_OFFLINE_WITHOUT_FIX_SECONDS", default: .seconds(300), in: 10...86_400)
    }
}
