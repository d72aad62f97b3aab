import Foundation

/// A JSON value that keeps what a client sent exactly: object key order and number lexemes. Socket.IO payloads
/// are parsed into it and echoed or re-encoded without reformatting.
public enum JSONValue: Sendable, Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    /// The number as written, e.g. `1`, `-2.5e3`.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// A number written as the decimal integer `value`.
    public init(_ value: Int) { self = .number(String(value)) }
    /// A number: a whole `value` below 10^15 in magnitude is written as an integer (`3`), others as Swift prints
    /// them (`2.5`, `1e+20`). `value` must be finite: NaN and infinity have no JSON form.
    public init(_ value: Double) {
        self = .number(value.rounded() == value && abs(value) < 1e15 ? String(Int64(value)) : String(value))
    }

    /// Compact JSON: no spaces, `/` not escaped, non-ASCII as UTF-8.
    public var serialized: String {
        var output = ""
        write(to: &output)
        return output
    }

    public var description: String { serialized }

    /// Appends the compact JSON text (as ``serialized`` has it) to `output`.
    public func write(to output: inout String) {
        switch self {
        case .null: output += "null"
        case .bool(let value): output += value ? "true" : "false"
        case .number(let lexeme): output += lexeme
        case .string(let text): JSONValue.writeString(text, to: &output)
        case .array(let values):
            output += "["
            for (index, value) in values.enumerated() {
                if index > 0 { output += "," }
                value.write(to: &output)
            }
            output += "]"
        case .object(let object):
            output += "{"
            for (index, entry) in object.entries.enumerated() {
                if index > 0 { output += "," }
                JSONValue.writeString(entry.key, to: &output)
                output += ":"
                entry.value.write(to: &output)
            }
            output += "}"
        }
    }

    static func writeString(_ text: String, to output: inout String) {
        output += "\""
        // Most strings need no escape: appended whole (a scalar at a time was 3% of the location service's CPU).
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }) else {
            output += text
            output += "\""
            return
        }
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case "\u{08}": output += "\\b"
            case "\u{0C}": output += "\\f"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }

    /// The value of `key` if this is an object that has it.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let object) = self else { return nil }
        return object[key]
    }

    /// Element `index` if this is an array that long.
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let values) = self, values.indices.contains(index) else { return nil }
        return values[index]
    }

    /// The text, if this is a string (nil for any other value, numbers included).
    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// The number, if this is one.
    public var doubleValue: Double? {
        if case .number(let lexeme) = self { return Double(lexeme) }
        return nil
    }

    /// The elements, if this is an array (otherwise none).
    public var arrayValue: [JSONValue] {
        if case .array(let values) = self { return values }
        return []
    }

    /// Whether this is an object (false for every other value, null included).
    public var isObject: Bool {
        if case .object = self { return true }
        return false
    }
}

extension JSONValue: Decodable {
    /// Decodes any JSON value (object member order is not kept when decoding through `Decoder`).
    public init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            var values: [JSONValue] = []
            while !array.isAtEnd { values.append(try array.decode(JSONValue.self)) }
            self = .array(values)
            return
        }
        if let object = try? decoder.container(keyedBy: MemberKey.self) {
            var entries: [(key: String, value: JSONValue)] = []
            for key in object.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) {
                entries.append((key.stringValue, try object.decode(JSONValue.self, forKey: key)))
            }
            self = .object(JSONObject(entries))
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let value = try? single.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? single.decode(Int64.self) {
            self = .number(String(value))
        } else if let value = try? single.decode(Double.self) {
            self = JSONValue(value)
        } else {
            self = .string(try single.decode(String.self))
        }
    }
}

extension JSONValue: Encodable {
    /// Encodes the value through any `Encoder`: numbers as integers when they are, otherwise as doubles.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .number(let lexeme):
            var container = encoder.singleValueContainer()
            if let integer = Int64(lexeme) {
                try container.encode(integer)
            } else {
                try container.encode(Double(lexeme) ?? 0)
            }
        case .string(let text):
            var container = encoder.singleValueContainer()
            try container.encode(text)
        case .array(let values):
            var container = encoder.unkeyedContainer()
            for value in values { try container.encode(value) }
        case .object(let object):
            var container = encoder.container(keyedBy: MemberKey.self)
            for entry in object.entries { try container.encode(entry.value, forKey: MemberKey(stringValue: entry.key)) }
        }
    }

}

private struct MemberKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// A JSON object's members in the order they were written.
public struct JSONObject: Sendable, Equatable {
    /// The members in the order they were written; a key may occur more than once (lookups find the first).
    public var entries: [(key: String, value: JSONValue)]

    /// An object with `entries` as its members, in this order.
    public init(_ entries: [(key: String, value: JSONValue)] = []) { self.entries = entries }

    /// The value of the first member named `key`, or nil when there is none.
    public subscript(key: String) -> JSONValue? {
        entries.first { $0.key == key }?.value
    }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        lhs.entries.count == rhs.entries.count
            && zip(lhs.entries, rhs.entries).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }
}
