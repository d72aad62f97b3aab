import Foundation

extension JSONValue {
    /// Parses one JSON value that must span all of `text` (surrounding whitespace allowed).
    public static func parse(_ text: Substring) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(Array(text.utf8))
        return try parser.parseDocument()
    }

    /// Parses one JSON value that must span all of `text` (surrounding whitespace allowed).
    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(text[...])
    }

    /// Parses one JSON value that must span all of `bytes`, UTF-8 text (surrounding whitespace allowed).
    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes)
        return try parser.parseDocument()
    }
}

/// The parser behind `JSONValue.parse`, over UTF-8 bytes: keeps object key order and number lexemes.
private struct JSONParser {
    let bytes: [UInt8]
    var index = 0
    var depth = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected trailing characters") }
        return value
    }

    func fail(_ reason: String) -> JSONParseError { JSONParseError(offset: index, reason: reason) }

    mutating func skipWhitespace() {
        while index < bytes.count,
            bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09
        {
            index += 1
        }
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw fail("unexpected end") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    mutating func literal(_ word: String) throws(JSONParseError) {
        for byte in word.utf8 {
            guard index < bytes.count, bytes[index] == byte else { throw fail("expected \(word)") }
            index += 1
        }
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        guard depth <= 64 else { throw fail("nested too deeply") }
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var entries: [(key: String, value: JSONValue)] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(JSONObject(entries))
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            skipWhitespace()
            entries.append((key, try parseValue()))
            skipWhitespace()
            guard index < bytes.count else { throw fail("unterminated object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard bytes[index] == UInt8(ascii: "}") else { throw fail("expected ',' or '}'") }
            index += 1
            return .object(JSONObject(entries))
        }
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var values: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(values)
        }
        while true {
            skipWhitespace()
            values.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw fail("unterminated array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard bytes[index] == UInt8(ascii: "]") else { throw fail("expected ',' or ']'") }
            index += 1
            return .array(values)
        }
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        func digits() -> Int {
            let from = index
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
            return index - from
        }
        guard index < bytes.count else { throw fail("bad number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if digits() == 0 {
            throw fail("bad number")
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw fail("bad fraction") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard digits() > 0 else { throw fail("bad exponent") }
        }
        return .number(String(decoding: bytes[start..<index], as: UTF8.self))
    }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1
        let start = index
        // Fast path: no escapes.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = String(decoding: bytes[start..<index], as: UTF8.self)
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { break }
            index += 1
        }
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: String(decoding: bytes[start..<index], as: UTF8.self).unicodeScalars)
        var pending: [UInt8] = []
        func flush() {
            if !pending.isEmpty {
                scalars.append(contentsOf: String(decoding: pending, as: UTF8.self).unicodeScalars)
                pending.removeAll(keepingCapacity: true)
            }
        }
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                flush()
                index += 1
                return String(scalars)
            case UInt8(ascii: "\\"):
                flush()
                index += 1
                guard index < bytes.count else { throw fail("unterminated escape") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    let unit = try hex4()
                    if (0xD800...0xDBFF).contains(unit) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        else {
                            throw fail("lone surrogate")
                        }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("bad surrogate pair") }
                        let value = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                        scalars.append(Unicode.Scalar(value)!)
                    } else {
                        guard let scalar = Unicode.Scalar(unit) else { throw fail("lone surrogate") }
                        scalars.append(scalar)
                    }
                default: throw fail("bad escape")
                }
            case 0..<0x20:
                throw fail("control character in string")
            default:
                pending.append(byte)
                index += 1
            }
        }
        throw fail("unterminated string")
    }

    mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("bad \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case 0x30...0x39: digit = UInt32(byte - 0x30)
            case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
            default: throw fail("bad \\u escape")
            }
            value = value * 16 + digit
            index += 1
        }
        return value
    }
}

/// Why a text is not JSON.
public struct JSONParseError: Error, CustomStringConvertible {
    /// Where parsing stopped: the number of UTF-8 bytes before the offending one, from the start of the input.
    public var offset: Int
    /// What was wrong there, e.g. `unexpected end` or `nested too deeply` (more than 64 arrays and objects deep).
    public var reason: String
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}
