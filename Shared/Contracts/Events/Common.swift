import Foundation

// One file for what payloads on several topics share: points, addresses, people, vendors and payment modes.

/// A point on the map, WGS-84 degrees.
package struct GeoPoint: Codable, Sendable, Equatable, Hashable {
    package var lat: Double
    package var lng: Double
    package init(lat: Double, lng: Double) {
        self.lat = lat
        self.lng = lng
    }
}

/// A street address with its neighbourhood and position.
extension GeoPoint {
    /// The mean radius of the Earth in metres.
    package static let earthRadiusMeters = 6_371_000.0

    /// Great-circle (haversine) distance in metres.
    package func meters(to other: GeoPoint) -> Double {
        let radians = Double.pi / 180
        let dLat = (other.lat - lat) * radians
        let dLng = (other.lng - lng) * radians
        let h =
            sin(dLat / 2) * sin(dLat / 2) + cos(lat * radians) * cos(other.lat * radians) * sin(dLng / 2)
            * sin(dLng / 2)
        return 2 * Self.earthRadiusMeters * asin(min(1, sqrt(h)))
    }
}

package struct Address: Codable, Sendable, Equatable {
    package var line1: String
    /// The neighbourhood: what a rider is shown before accepting, never the street.
    package var area: String
    package var lat: Double
    package var lng: Double
    package init(line1: String, area: String, lat: Double, lng: Double) {
        self.line1 = line1
        self.area = area
        self.lat = lat
        self.lng = lng
    }
    package var point: GeoPoint { GeoPoint(lat: lat, lng: lng) }
}

/// A person named in an event: a rider or a technician.
package struct PersonRef: Codable, Sendable, Equatable {
    package var id: String
    package var name: String
    package init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}

/// A vendor as consumers need it without calling back: name, address, position.
package struct VendorRef: Codable, Sendable, Equatable {
    package var id: String
    package var name: String
    package var address: Address
    package init(id: String, name: String, address: Address) {
        self.id = id
        self.name = name
        self.address = address
    }
}

/// How an order is paid.
package enum PaymentMode: String, Codable, Sendable, CaseIterable {
    case prepaid
    case cash
}
