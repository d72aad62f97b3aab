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
    /// `ALLOCATION_TICK_MS`, default 250: how often deadlines and retries are checked.
    package var tick: Duration
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
        offlineWithoutFix = try environment.seconds(
            "RIDER_OFFLINE_WITHOUT_FIX_SECONDS", default: .seconds(300), in: 10...86_400)
    }
}

/// An offer as the rider's app sees it: the neighbourhood of the delivery, never the customer's address.
package struct OfferView: Codable, Sendable, Equatable, ResponseEncodable {
    package struct Vendor: Codable, Sendable, Equatable {
        package var name: String
        package var address: String
    }

    package struct Earnings: Codable, Sendable, Equatable {
        package var amount: Decimal
        package var currency: String
    }

    package var offerId: String
    package var orderId: String
    package var vendor: Vendor
    package var deliveryArea: String
    /// From the rider to the vendor.
    package var distanceKm: Double
    /// The whole trip: to the vendor, then to the customer (what the earnings are for).
    package var tripDistanceKm: Double?
    package var earnings: Earnings
    package var expiresAt: Date
    package var timeoutSeconds: Int
    package var status: OfferStatus
}

/// A rider's availability as the app sees it.
package struct RiderView: Codable, Sendable, Equatable, ResponseEncodable {
    package var riderId: String
    package var status: RiderStatus
    package var location: RiderLocation?
    package var currentOrderId: String?
    /// Whether the rider has a live `/rider` socket on any instance whose app is in the foreground (what the rider
    /// is told goes there; otherwise it is pushed).
    package var connected = false
    /// Why the system took the rider Offline, until they go Online again; absent when they chose it.
    package var offlineReason: OfflineReason?
    /// What the rider is told about it.
    package var offlineMessage: String?
}

/// A rider on duty as operators see them on the live map: where they are and the order they hold, if any.
package struct OnDutyRider: Codable, Sendable, Equatable {
    package var riderId: String
    package var name: String
    package var status: RiderStatus
    package var location: RiderLocation?
    package var currentOrderId: String?
}

/// The riders on duty, most recently changed first.
package struct OnDutyRiders: Codable, Sendable, Equatable, ResponseEncodable {
    package var riders: [OnDutyRider]
}

/// A position fix from the rider's device.
package struct RiderLocation: Codable, Sendable, Equatable {
    package var lat: Double
    package var lng: Double
    package var accuracyMeters: Double
    package var recordedAt: Date

    package init(lat: Double, lng: Double, accuracyMeters: Double, recordedAt: Date) {
        self.lat = lat
        self.lng = lng
        self.accuracyMeters = accuracyMeters
        self.recordedAt = recordedAt
    }
}

/// What the rider's sockets are told after a transaction commits.
package enum RiderNotice: Sendable {
    case offer(riderId: String, OfferView)
    case expired(riderId: String, offerId: String, orderId: String)
    case rescinded(riderId: String, offerId: String, orderId: String)
    /// The order the rider was delivering was cancelled.
    case orderCancelled(riderId: String, orderId: String)
    /// The system took the rider Offline.
    case wentOffline(riderId: String, OfflineReason)
    /// An operator gave the rider an order.
    case assigned(riderId: String, orderId: String)
    /// The rider's order was taken away before pickup (re-assigned, or released back to allocation).
    case unassigned(riderId: String, orderId: String)
}
