import Foundation

/// How the typed API (typed handlers, emits and acknowledgements) turns values into JSON and back. The platform
/// passes its own (``SocketIOConfiguration/coding``); ``standard`` writes dates as ISO-8601 in UTC with milliseconds.
public struct JSONCoding: Sendable {
    /// The JSON text of a value: one JSON value in UTF-8 (typed emits put it into their packets as written).
    public var encode: @Sendable (any Encodable) throws -> Data
    /// The value of a type decoded from JSON text.
    public var decode: @Sendable (any Decodable.Type, Data) throws -> any Decodable

    /// A coding made of the application's own encode and decode functions (e.g. with its date and key strategies).
    public init(
        encode: @escaping @Sendable (any Encodable) throws -> Data,
        decode: @escaping @Sendable (any Decodable.Type, Data) throws -> any Decodable
    ) {
        self.encode = encode
        self.decode = decode
    }

    /// Foundation's JSON with sorted keys, `/` unescaped and dates such as `2026-11-21T10:15:00.250Z` (read with
    /// or without the fraction).
    public static let standard = JSONCoding(
        encode: { value in
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            encoder.dateEncodingStrategy = .custom { date, encoder in
                var container = encoder.singleValueContainer()
                try container.encode(date.formatted(withFraction))
            }
            return try encoder.encode(value)
        },
        decode: { type, data in
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .custom { decoder in
                let container = try decoder.singleValueContainer()
                let text = try container.decode(String.self)
                if let date = (try? withFraction.parse(text)) ?? (try? withoutFraction.parse(text)) { return date }
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "expected an ISO-8601 date such as 2026-11-21T10:15:00Z")
            }
            return try decoder.decode(type, from: data)
        })

    private static let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    private static let withoutFraction = Date.ISO8601FormatStyle()
}

extension JSONValue {
    /// Encodes `value` with `coding`.
    public init(encoding value: some Encodable, with coding: JSONCoding) throws {
        self = try JSONValue.parse(Array(try coding.encode(value)))
    }

    /// Decodes this value as `T` with `coding`.
    public func decode<T: Decodable>(as type: T.Type, with coding: JSONCoding) throws -> T {
        guard let value = try coding.decode(type, Data(serialized.utf8)) as? T else {
            throw DecodingError.typeMismatch(
                type, DecodingError.Context(codingPath: [], debugDescription: "the coding returned another type"))
        }
        return value
    }
}
