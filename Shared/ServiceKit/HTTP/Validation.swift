import Contracts
import Foundation

/// Checks of request fields beyond their JSON types; each failure is 400 `VALIDATION_FAILED` naming the field.
package enum Validate {
    /// Whether `value` has at most `maximum` characters and at most 4 x `maximum` UTF-8 bytes. Both count: one
    /// character may carry any number of combining scalars, so a limit in characters alone bounds no memory.
    package static func fits(_ value: String, maximumCharacters maximum: Int) -> Bool {
        value.utf8.count <= maximum * 4 && value.count <= maximum
    }

    /// The wording of the ``fits(_:maximumCharacters:)`` limit, for error messages.
    package static func limitDescription(maximumCharacters maximum: Int) -> String {
        "\(maximum) characters (\(maximum * 4) bytes of UTF-8)"
    }

    /// A non-empty text of at most `maximum` characters (and 4 x `maximum` bytes), trimmed.
    package static func text(_ value: String, _ field: String, maximum: Int = 200) throws(APIError) -> String {
        let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw APIError.validation("'\(field)' must not be empty") }
        guard fits(trimmed, maximumCharacters: maximum) else {
            throw APIError.validation("'\(field)' must be at most \(limitDescription(maximumCharacters: maximum))")
        }
        return trimmed
    }

    /// An amount of money from 0 to `maximum` with at most two decimals (paise, cents): a third decimal is
    /// refused rather than silently rounded.
    package static func amount(_ value: Decimal, _ field: String, maximum: Decimal) throws(APIError) {
        guard value >= 0, value <= maximum else { throw APIError.validation("'\(field)' must be from 0 to \(maximum)") }
        var hundredths = value * 100
        var whole = Decimal()
        NSDecimalRound(&whole, &hundredths, 0, .plain)
        guard whole == hundredths else { throw APIError.validation("'\(field)' must have at most two decimals") }
    }

    /// A latitude and longitude in range.
    package static func coordinates(lat: Double, lng: Double, _ field: String) throws(APIError) {
        if let problem = coordinateProblem(lat: lat, lng: lng, field) { throw APIError.validation(problem) }
    }

    /// What is wrong with a latitude and longitude, naming the field; nil if both are in range. For domain rules
    /// that throw their own error type.
    package static func coordinateProblem(lat: Double, lng: Double, _ field: String) -> String? {
        guard lat.isFinite, (-90...90).contains(lat) else { return "'\(field).lat' must be from -90 to 90" }
        guard lng.isFinite, (-180...180).contains(lng) else { return "'\(field).lng' must be from -180 to 180" }
        return nil
    }

    /// The largest horizontal accuracy a position may report, in metres: anything coarser says nothing.
    package static let maximumAccuracyMeters = 10_000.0

    /// What is wrong with a position's accuracy in metres (finite, from 0 to ``maximumAccuracyMeters``), naming the
    /// field; nil if nothing is. For domain rules that throw their own error type.
    package static func accuracyProblem(_ meters: Double, _ field: String) -> String? {
        guard meters.isFinite, (0...maximumAccuracyMeters).contains(meters) else {
            return "'\(field)' must be from 0 to \(Int(maximumAccuracyMeters))"
        }
        return nil
    }

    /// A position's latitude, longitude and accuracy in range.
    package static func position(lat: Double, lng: Double, accuracyMeters: Double, _ field: String) throws(APIError) {
        try coordinates(lat: lat, lng: lng, field)
        if let problem = accuracyProblem(accuracyMeters, "\(field).accuracyMeters") {
            throw APIError.validation(problem)
        }
    }

    /// An address with a street, a neighbourhood and valid coordinates.
    package static func address(_ address: Address, _ field: String) throws(APIError) -> Address {
        try coordinates(lat: address.lat, lng: address.lng, field)
        return Address(
            line1: try text(address.line1, "\(field).line1"),
            area: try text(address.area, "\(field).area", maximum: 100),
            lat: address.lat, lng: address.lng
        )
    }

    /// An identifier: 1 to 128 bytes of letters, digits, `-`, `_`, `.`, `:` or `@`.
    package static func identifier(_ value: String, _ field: String) throws(APIError) -> String {
        guard !value.isEmpty, value.utf8.count <= 128, value.unicodeScalars.allSatisfy(identifierScalars.contains)
        else {
            throw APIError.validation("'\(field)' must be 1 to 128 bytes of letters, digits, '-', '_', '.', ':' or '@'")
        }
        return value
    }

    private static let identifierScalars = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-_.:@"))
}

extension Validate {
    /// The page size of a list request: the `limit` query parameter, a whole number from 1 to `maximum`.
    /// - Parameter text: the parameter as sent; `nil` (absent) gives `defaultValue`.
    package static func pageLimit(_ text: String?, default defaultValue: Int, maximum: Int = 100) throws(APIError)
        -> Int
    {
        guard let text else { return defaultValue }
        guard let limit = Int(text), (1...maximum).contains(limit) else {
            throw APIError.validation("'limit' must be a whole number from 1 to \(maximum)")
        }
        return limit
    }
}
