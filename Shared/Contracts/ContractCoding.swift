import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The one JSON encoding of every contract: ISO-8601 dates with milliseconds, sorted keys.
package enum ContractCoding {
    /// Accepts ISO-8601 dates with or without fractional seconds.
    package static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = ISO8601.parse(text) else {
                throw DecodingError.dataCorruptedError(
                    in: container,
                    debugDescription: "expected an ISO-8601 date such as 2026-11-21T10:15:00Z, got '\(text)'"
                )
            }
            return date
        }
        return decoder
    }

    package static func encode(_ value: some Encodable) throws -> Data {
        try ContractJSONEncoder().encode(value)
    }

    /// Decodes `data`; a string holding the NUL character is refused with ``NULCharacterError`` before decoding
    /// (Postgres stores no NUL in text, so such a value could only fail later, half-way through a write).
    package static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try NULCharacterError.check(data)
        return try makeDecoder().decode(type, from: data)
    }
}

/// A JSON text holds the NUL character (U+0000) in a string, raw or as the escape `\u0000`.
package struct NULCharacterError: Error, CustomStringConvertible {
    package var description: String { "strings must not contain the NUL character (U+0000)" }

    /// Throws if `json` holds a NUL byte or a `\u0000` escape. Escape pairs are consumed left to right, so the
    /// text `\\u0000` (an escaped backslash, then `u0000`) is not mistaken for one.
    package static func check(_ json: Data) throws(NULCharacterError) {
        let found = json.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Bool in
            var index = 0
            let count = bytes.count
            while index < count {
                switch bytes[index] {
                case 0:
                    return true
                case UInt8(ascii: "\\"):
                    if index + 5 < count, bytes[index + 1] == UInt8(ascii: "u"), bytes[index + 2] == UInt8(ascii: "0"),
                        bytes[index + 3] == UInt8(ascii: "0"), bytes[index + 4] == UInt8(ascii: "0"),
                        bytes[index + 5] == UInt8(ascii: "0")
                    {
                        return true
                    }
                    index += 2
                default:
                    index += 1
                }
            }
            return false
        }
        if found { throw NULCharacterError() }
    }
}

/// ISO-8601 timestamps on the wire: UTC, millisecond precision, e.g. `2026-11-21T10:15:00.250Z`. A date is
/// rounded to whole milliseconds both ways, so what is decoded equals what was encoded.
package enum ISO8601 {
    /// The instants a timestamp names: from the start of year 0 to the end of year 9999 (four-digit years).
    package static let range =
        Date(
            timeIntervalSince1970: -62_167_219_200)...Date(
            timeIntervalSince1970: 253_402_300_799.999)

    /// The timestamp of `date`; one outside ``range`` gets a year of more than four digits (and one beyond 285
    /// million years from 1970 that year's).
    package static func format(_ date: Date) -> String {
        let totalMilliseconds = Int64(min(max((date.timeIntervalSince1970 * 1000).rounded(), -9e18), 9e18))
        var seconds = time_t(totalMilliseconds.floorDivided(by: 1000))
        let milliseconds = Int(totalMilliseconds - Int64(seconds) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let year = Int(parts.tm_year) + 1900
        guard (0...9999).contains(year) else {
            return String(
                format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", year, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
                Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), milliseconds
            )
        }
        // Written digit by digit: `String(format:)` cost about 4% of the location service's CPU at 5,000 positions a
        // second (issue 21).
        return String(unsafeUninitializedCapacity: 24) { text in
            var index = 0
            func put(_ value: Int, digits: Int, then separator: UInt8) {
                var divisor = 1
                for _ in 1..<digits { divisor *= 10 }
                while divisor > 0 {
                    text[index] = UInt8(ascii: "0") + UInt8(value / divisor % 10)
                    index += 1
                    divisor /= 10
                }
                text[index] = separator
                index += 1
            }
            put(year, digits: 4, then: UInt8(ascii: "-"))
            put(Int(parts.tm_mon) + 1, digits: 2, then: UInt8(ascii: "-"))
            put(Int(parts.tm_mday), digits: 2, then: UInt8(ascii: "T"))
            put(Int(parts.tm_hour), digits: 2, then: UInt8(ascii: ":"))
            put(Int(parts.tm_min), digits: 2, then: UInt8(ascii: ":"))
            put(Int(parts.tm_sec), digits: 2, then: UInt8(ascii: "."))
            put(milliseconds, digits: 3, then: UInt8(ascii: "Z"))
            return index
        }
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)`; nil for anything else.
    package static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        var index = 0
        func number(_ digits: Int) -> Int? {
            guard index + digits <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<(index + digits)] {
                guard byte >= 48, byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            index += digits
            return value
        }
        func expect(_ character: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == character else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect(45), let month = number(2), expect(45), let day = number(2),
            index < bytes.count, bytes[index] == 84 || bytes[index] == 116 || bytes[index] == 32
        else { return nil }
        index += 1
        guard let hour = number(2), expect(58), let minute = number(2), expect(58), let second = number(2),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var milliseconds = 0
        if expect(46) {
            var digits = 0
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                if digits < 3 { milliseconds = milliseconds * 10 + Int(bytes[index] - 48) }
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            for _ in min(digits, 3)..<3 { milliseconds *= 10 }
        }
        var offsetSeconds = 0
        if expect(90) || expect(122) {
        } else if index < bytes.count, bytes[index] == 43 || bytes[index] == 45 {
            let sign = bytes[index] == 45 ? -1 : 1
            index += 1
            guard let offsetHours = number(2) else { return nil }
            _ = expect(58)
            guard let offsetMinutes = number(2), offsetHours < 24, offsetMinutes < 60 else { return nil }
            offsetSeconds = sign * (offsetHours * 3600 + offsetMinutes * 60)
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let seconds = Int64(timegm(&parts)) - Int64(offsetSeconds)
        return Date(timeIntervalSince1970: Double(seconds * 1000 + Int64(milliseconds)) / 1000)
    }
}

extension Int64 {
    fileprivate func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
