import Foundation

/// The contracts' JSON text (``ContractCoding/encode(_:)``), byte for byte what Foundation's `JSONEncoder` writes
/// with sorted keys, slashes unescaped and dates as ``ISO8601/format(_:)``: members in the UTF-8 order of their keys
/// (a key encoded twice keeps its last value), `Data` in base64, a `URL` as its absolute string, a `Decimal` and
/// floating-point numbers as their description without a trailing `.0`, NaN and infinities refused. Foundation
/// builds a tree of boxed values in dictionaries and casts every value to four types before encoding it; this keeps
/// scalars as their text and only holds an object's members until they are sorted (`ContractJSONEncoderTests`
/// compares the two).
package struct ContractJSONEncoder: Sendable {
    /// How deep arrays and objects may nest, as in Foundation's writer.
    static let maximumDepth = 512

    package init() {}

    /// The JSON text of `value`; throws `EncodingError.invalidValue` for a value that encodes nothing, a
    /// non-finite number, or nesting deeper than 512.
    package func encode<T: Encodable>(_ value: T) throws -> Data {
        let root = JSONEncoding(parent: nil, key: nil)
        guard let node = try root.node(for: value, key: nil) else {
            throw EncodingError.invalidValue(
                value, .init(codingPath: [], debugDescription: "Top-level \(T.self) did not encode any values."))
        }
        var output: [UInt8] = []
        output.reserveCapacity(256)
        try node.write(to: &output, depth: 0)
        return Data(output)
    }
}

/// A value on its way to text.
enum JSONNode {
    /// A number, `true`, `false` or `null`, written as it is.
    case literal(String)
    case string(String)
    case object(JSONObjectNode)
    case array(JSONArrayNode)
    /// What an encoder handed out by `superEncoder` holds once its caller is done with it.
    case deferred(JSONEncoding)

    func write(to output: inout [UInt8], depth: Int) throws {
        switch self {
        case .literal(let text):
            output.append(contentsOf: text.utf8)
        case .string(let text):
            Self.writeString(text, to: &output)
        case .array(let array):
            guard depth + 1 < ContractJSONEncoder.maximumDepth else { throw Self.tooDeep }
            output.append(UInt8(ascii: "["))
            for (index, item) in array.items.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                try item.write(to: &output, depth: depth + 1)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let object):
            guard depth + 1 < ContractJSONEncoder.maximumDepth else { throw Self.tooDeep }
            output.append(UInt8(ascii: "{"))
            let keys = object.keys
            // Sorted by key's bytes, then by when each was encoded, so of a key encoded twice the last is kept.
            let order = keys.indices.sorted { left, right in
                keys[left].utf8.elementsEqual(keys[right].utf8)
                    ? left < right : keys[left].utf8.lexicographicallyPrecedes(keys[right].utf8)
            }
            var first = true
            for (position, index) in order.enumerated() {
                if position + 1 < order.count, keys[order[position + 1]].utf8.elementsEqual(keys[index].utf8) {
                    continue
                }
                if !first { output.append(UInt8(ascii: ",")) }
                first = false
                Self.writeString(keys[index], to: &output)
                output.append(UInt8(ascii: ":"))
                try object.values[index].write(to: &output, depth: depth + 1)
            }
            output.append(UInt8(ascii: "}"))
        case .deferred(let encoding):
            try (encoding.value ?? .object(JSONObjectNode())).write(to: &output, depth: depth)
        }
    }

    private static var tooDeep: EncodingError {
        EncodingError.invalidValue(
            0, .init(codingPath: [], debugDescription: "Too many nested arrays or dictionaries"))
    }

    /// A JSON string as Foundation writes one with `.withoutEscapingSlashes`: a run of bytes that need no escape
    /// is appended whole.
    static func writeString(_ text: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            var start = 0
            for (index, byte) in bytes.enumerated() {
                let escape: StaticString
                switch byte {
                case UInt8(ascii: "\""): escape = "\\\""
                case UInt8(ascii: "\\"): escape = "\\\\"
                case 0x08: escape = "\\b"
                case 0x0C: escape = "\\f"
                case UInt8(ascii: "\n"): escape = "\\n"
                case UInt8(ascii: "\r"): escape = "\\r"
                case UInt8(ascii: "\t"): escape = "\\t"
                case 0x00..<0x20: escape = "\\u00"
                default: continue
                }
                output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                output.append(contentsOf: UnsafeBufferPointer(start: escape.utf8Start, count: escape.utf8CodeUnitCount))
                if escape.utf8CodeUnitCount == 4 {
                    output.append(hexDigit(byte >> 4))
                    output.append(hexDigit(byte & 0x0F))
                }
                start = index + 1
            }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
        }
        output.append(UInt8(ascii: "\""))
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }

    static func bool(_ value: Bool) -> JSONNode { .literal(value ? "true" : "false") }

    static func integer(_ value: some FixedWidthInteger) -> JSONNode { .literal(value.description) }

    /// A finite number's description without a trailing `.0`, as Foundation writes it.
    static func number<F: BinaryFloatingPoint & CustomStringConvertible>(
        _ value: F, at path: @autoclosure () -> [any CodingKey]
    )
        throws -> JSONNode
    {
        guard value.isFinite else {
            throw EncodingError.invalidValue(
                value,
                .init(codingPath: path(), debugDescription: "Unable to encode \(F.self).\(value) directly in JSON."))
        }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return .literal(text)
    }
}

/// An object's members in the order encoded.
final class JSONObjectNode {
    var keys: [String] = []
    var values: [JSONNode] = []

    func set(_ key: some CodingKey, _ value: JSONNode) {
        keys.append(key.stringValue)
        values.append(value)
    }

    /// The object `node` is, or else a new one given to `place` (a container asked for again is the same one, as in
    /// Foundation).
    static func `in`(_ node: JSONNode?, orPlace place: (JSONNode) -> Void) -> JSONObjectNode {
        if case .object(let existing)? = node { return existing }
        let object = JSONObjectNode()
        place(.object(object))
        return object
    }

    /// The value last encoded at `key`, if any.
    func value(at key: some CodingKey) -> JSONNode? {
        let name = key.stringValue
        return keys.lastIndex(where: { $0.utf8.elementsEqual(name.utf8) }).map { values[$0] }
    }
}

final class JSONArrayNode {
    var items: [JSONNode] = []

    /// The array `node` is, or else a new one given to `place` (as ``JSONObjectNode/in(_:orPlace:)``).
    static func `in`(_ node: JSONNode?, orPlace place: (JSONNode) -> Void) -> JSONArrayNode {
        if case .array(let existing)? = node { return existing }
        let array = JSONArrayNode()
        place(.array(array))
        return array
    }
}

/// The encoder a value's `encode(to:)` is given; its coding path is found from its parents only when asked for.
final class JSONEncoding: Encoder {
    let parent: JSONEncoding?
    let key: (any CodingKey)?
    /// The path above the root of its chain of parents: a super encoder's, which has no parent (the node that holds
    /// it is held by its parent, which would then hold itself).
    let base: [any CodingKey]
    /// What the value encoded, nil until it encodes something.
    var value: JSONNode?

    init(parent: JSONEncoding?, key: (any CodingKey)?) {
        self.parent = parent
        self.key = key
        self.base = []
    }

    init(path: [any CodingKey]) {
        self.parent = nil
        self.key = nil
        self.base = path
    }

    var codingPath: [any CodingKey] {
        var path: [any CodingKey] = []
        var encoding: JSONEncoding? = self
        var root = self
        while let current = encoding {
            if let key = current.key { path.append(key) }
            root = current
            encoding = current.parent
        }
        return root.base + path.reversed()
    }

    func path(appending key: some CodingKey) -> [any CodingKey] { codingPath + [key] }

    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let object = JSONObjectNode.in(value, orPlace: { value = $0 })
        return KeyedEncodingContainer(JSONKeyedContainer(encoding: self, object: object))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        JSONUnkeyedContainer(encoding: self, array: JSONArrayNode.in(value, orPlace: { value = $0 }))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { JSONSingleValueContainer(encoding: self) }

    /// The node of `value` encoded at `key` below this encoder; nil for a value that encodes nothing (refused at the
    /// top, an empty object anywhere else, as in Foundation: ``child(_:key:)``).
    func node<T: Encodable>(for value: T, key: (any CodingKey)?) throws -> JSONNode? {
        if T.self == Date.self { return .string(ISO8601.format(value as! Date)) }
        if T.self == Data.self { return .string((value as! Data).base64EncodedString()) }
        if T.self == URL.self { return .string((value as! URL).absoluteString) }
        if T.self == Decimal.self { return .literal((value as! Decimal).description) }
        let child = JSONEncoding(parent: self, key: key)
        try value.encode(to: child)
        return child.value
    }

    /// The node of `value` below this encoder, never nil.
    func child<T: Encodable>(_ value: T, key: (any CodingKey)?) throws -> JSONNode {
        try node(for: value, key: key) ?? .object(JSONObjectNode())
    }
}

struct JSONKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoding: JSONEncoding
    let object: JSONObjectNode

    var codingPath: [any CodingKey] { encoding.codingPath }

    mutating func encodeNil(forKey key: Key) throws { object.set(key, .literal("null")) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { object.set(key, .bool(value)) }
    mutating func encode(_ value: String, forKey key: Key) throws { object.set(key, .string(value)) }
    mutating func encode(_ value: Double, forKey key: Key) throws {
        object.set(key, try .number(value, at: encoding.path(appending: key)))
    }
    mutating func encode(_ value: Float, forKey key: Key) throws {
        object.set(key, try .number(value, at: encoding.path(appending: key)))
    }
    mutating func encode(_ value: Int, forKey key: Key) throws { object.set(key, .integer(value)) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { object.set(key, .integer(value)) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { object.set(key, .integer(value)) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { object.set(key, .integer(value)) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { object.set(key, .integer(value)) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { object.set(key, .integer(value)) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { object.set(key, .integer(value)) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { object.set(key, .integer(value)) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { object.set(key, .integer(value)) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { object.set(key, .integer(value)) }
    mutating func encode(_ value: Int128, forKey key: Key) throws { object.set(key, .integer(value)) }
    mutating func encode(_ value: UInt128, forKey key: Key) throws { object.set(key, .integer(value)) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        object.set(key, try encoding.child(value, key: key))
    }

    /// The object at `key`: the one already there (as Foundation does), or a new one.
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        let nested = JSONObjectNode.in(object.value(at: key), orPlace: { object.set(key, $0) })
        return KeyedEncodingContainer(
            JSONKeyedContainer<NestedKey>(encoding: JSONEncoding(parent: encoding, key: key), object: nested))
    }

    /// The array at `key`: the one already there (as Foundation does), or a new one.
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = JSONArrayNode.in(object.value(at: key), orPlace: { object.set(key, $0) })
        return JSONUnkeyedContainer(encoding: JSONEncoding(parent: encoding, key: key), array: nested)
    }

    mutating func superEncoder() -> any Encoder { superEncoder(at: JSONCodingKey(stringValue: "super")) }

    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(at: key) }

    private func superEncoder(at key: some CodingKey) -> any Encoder {
        let nested = JSONEncoding(path: encoding.path(appending: key))
        object.set(key, .deferred(nested))
        return nested
    }
}

struct JSONUnkeyedContainer: UnkeyedEncodingContainer {
    let encoding: JSONEncoding
    let array: JSONArrayNode

    var codingPath: [any CodingKey] { encoding.codingPath }
    var count: Int { array.items.count }
    private var nextKey: JSONCodingKey { JSONCodingKey(intValue: array.items.count) }

    mutating func encodeNil() throws { array.items.append(.literal("null")) }
    mutating func encode(_ value: Bool) throws { array.items.append(.bool(value)) }
    mutating func encode(_ value: String) throws { array.items.append(.string(value)) }
    mutating func encode(_ value: Double) throws {
        array.items.append(try .number(value, at: encoding.path(appending: nextKey)))
    }
    mutating func encode(_ value: Float) throws {
        array.items.append(try .number(value, at: encoding.path(appending: nextKey)))
    }
    mutating func encode(_ value: Int) throws { array.items.append(.integer(value)) }
    mutating func encode(_ value: Int8) throws { array.items.append(.integer(value)) }
    mutating func encode(_ value: Int16) throws { array.items.append(.integer(value)) }
    mutating func encode(_ value: Int32) throws { array.items.append(.integer(value)) }
    mutating func encode(_ value: Int64) throws { array.items.append(.integer(value)) }
    mutating func encode(_ value: UInt) throws { array.items.append(.integer(value)) }
    mutating func encode(_ value: UInt8) throws { array.items.append(.integer(value)) }
    mutating func encode(_ value: UInt16) throws { array.items.append(.integer(value)) }
    mutating func encode(_ value: UInt32) throws { array.items.append(.integer(value)) }
    mutating func encode(_ value: UInt64) throws { array.items.append(.integer(value)) }
    mutating func encode(_ value: Int128) throws { array.items.append(.integer(value)) }
    mutating func encode(_ value: UInt128) throws { array.items.append(.integer(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        array.items.append(try encoding.child(value, key: nextKey))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
        -> KeyedEncodingContainer<NestedKey>
    {
        let nested = JSONObjectNode()
        let key = nextKey
        array.items.append(.object(nested))
        return KeyedEncodingContainer(
            JSONKeyedContainer<NestedKey>(encoding: JSONEncoding(parent: encoding, key: key), object: nested))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = JSONArrayNode()
        let key = nextKey
        array.items.append(.array(nested))
        return JSONUnkeyedContainer(encoding: JSONEncoding(parent: encoding, key: key), array: nested)
    }

    mutating func superEncoder() -> any Encoder {
        let nested = JSONEncoding(path: encoding.path(appending: nextKey))
        array.items.append(.deferred(nested))
        return nested
    }
}

struct JSONSingleValueContainer: SingleValueEncodingContainer {
    let encoding: JSONEncoding

    var codingPath: [any CodingKey] { encoding.codingPath }

    mutating func encodeNil() throws { encoding.value = .literal("null") }
    mutating func encode(_ value: Bool) throws { encoding.value = .bool(value) }
    mutating func encode(_ value: String) throws { encoding.value = .string(value) }
    mutating func encode(_ value: Double) throws { encoding.value = try .number(value, at: encoding.codingPath) }
    mutating func encode(_ value: Float) throws { encoding.value = try .number(value, at: encoding.codingPath) }
    mutating func encode(_ value: Int) throws { encoding.value = .integer(value) }
    mutating func encode(_ value: Int8) throws { encoding.value = .integer(value) }
    mutating func encode(_ value: Int16) throws { encoding.value = .integer(value) }
    mutating func encode(_ value: Int32) throws { encoding.value = .integer(value) }
    mutating func encode(_ value: Int64) throws { encoding.value = .integer(value) }
    mutating func encode(_ value: UInt) throws { encoding.value = .integer(value) }
    mutating func encode(_ value: UInt8) throws { encoding.value = .integer(value) }
    mutating func encode(_ value: UInt16) throws { encoding.value = .integer(value) }
    mutating func encode(_ value: UInt32) throws { encoding.value = .integer(value) }
    mutating func encode(_ value: UInt64) throws { encoding.value = .integer(value) }
    mutating func encode(_ value: Int128) throws { encoding.value = .integer(value) }
    mutating func encode(_ value: UInt128) throws { encoding.value = .integer(value) }
    mutating func encode<T: Encodable>(_ value: T) throws { encoding.value = try encoding.child(value, key: nil) }
}

/// An array index's or `super`'s key.
struct JSONCodingKey: CodingKey {
    let stringValue: String
    let intValue: Int?

    init(stringValue: String) {
        self.stringValue = stringValue
        intValue = nil
    }

    init(intValue: Int) {
        stringValue = "Index \(intValue)"
        self.intValue = intValue
    }
}
