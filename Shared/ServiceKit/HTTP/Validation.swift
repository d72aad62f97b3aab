import Contracts
import Foundation

/// Checks of request fields beyond their JSON types; each failure is 400 `VALIDATION_FAILED` naming the field.
package enum Validate {
    /// A non-empty text of at most `maximum` characters, trimmed.
    package static func text(_ value: String, _ field: String, maximum: Int = 200) throws(APIError) -> String {
        let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw APIError.validation("'\(field)' must not be empty") }
        guard trimmed.count <= maximum else { throw APIError.validation("'\(field)' must be at most \(maximum) characters") }
        return trimmed
    }

    /// A latitude and longitude in range.
    package static func coordinates(lat: Double, lng: Double, _ field: String) throws(APIError) {
        guard lat.isFinite, (-90...90).contains(lat) else { throw APIError.validation("'\(field).lat' must be from -90 to 90") }
        guard lng.isFinite, (-180...180).contains(lng) else { throw APIError.validation("'\(field).lng' must be from -180 to 180") }
    }

    /// An address with a street, a neighbourhood and valid coordinates.
    package static func address(_ address: Address, _ field: String) throws(APIError) -> Address {
        try coordinates(lat: address.lat, lng: address.lng, field)
        return Address(
            line1: try text(address.line1, "\(field).line1"), area: try text(address.area, "\(field).area", maximum: 100),
            lat: address.lat, lng: address.lng
        )
    }

    /// An identifier: 1 to 128 letters, digits, `-`, `_`, `.`, `:` or `@`.
    package static func identifier(_ value: String, _ field: String) throws(APIError) -> String {
        let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-_.:@"))
        guard !value.isEmpty, value.count <= 128, value.unicodeScalars.allSatisfy(allowed.contains) else {
            throw APIError.validation("'\(field)' must be 1 to 128 letters, digits, '-', '_', '.', ':' or '@'")
        }
        return value
    }
}
