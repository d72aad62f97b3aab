import Contracts
import Foundation
import Hummingbird
import ServiceKit

// The service's value types, kept together: each is a few lines and they are read together.

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
