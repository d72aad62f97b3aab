import Contracts
import Foundation
import Testing

/// ``ContractJSONEncoder`` against Foundation's `JSONEncoder` set up as the contracts' wire format was before it: the
/// same bytes for every event and for the corners of `Encodable`.
@Suite("Contract JSON encoder")
struct ContractJSONEncoderTests {
    /// Foundation's encoder as the contracts used it.
    static func foundationEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ISO8601.format(date))
        }
        return encoder
    }

    static func expectSameText<T: Encodable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let expected = String(decoding: try foundationEncoder().encode(value), as: UTF8.self)
        let written = String(decoding: try ContractJSONEncoder().encode(value), as: UTF8.self)
        #expect(written == expected, sourceLocation: sourceLocation)
    }

    @Test(
        "every event in its envelope is written as Foundation writes it", arguments: EventRoundTripTests.samples.indices
    )
    func events(index: Int) throws {
        func check<P: EventPayload>(_ payload: P) throws {
            try Self.expectSameText(
                EventEnvelope(aggregateId: "agg-1", occurredAt: EventRoundTripTests.date, payload: payload))
        }
        try check(EventRoundTripTests.samples[index])
    }

    @Test("strings: quotes, backslashes, control characters, slashes and non-ASCII text")
    func strings() throws {
        let texts = [
            "", "plain", "say \"hi\"", #"back\slash"#, "a/b</script>", "line\nbreak\r\ttab",
            "\u{08}\u{0C}\u{01}\u{1F}\u{7F}",
            "caf\u{E9} \u{1F6B2} \u{0915}\u{094D}\u{0937}", "\u{2028}\u{2029}", "nul\u{0}inside",
        ]
        try Self.expectSameText(texts)
        try Self.expectSameText(
            Dictionary(uniqueKeysWithValues: texts.enumerated().map { ("k\($0.offset)\($0.element)", $0.element) }))
    }

    @Test("numbers: integers at their limits, floating-point values as Foundation writes them, decimals")
    func numbers() throws {
        try Self.expectSameText([Int.min, -1, 0, 1, Int.max])
        try Self.expectSameText([UInt64.max])
        try Self.expectSameText([Int8.min, Int8.max])
        try Self.expectSameText(["min": Int128.min, "max": Int128.max])
        try Self.expectSameText([UInt128.max])
        try Self.expectSameText([
            0.0, -0.0, 1.0, 100.0, 0.1, 12.97, -77.5912345678, 1e-7, 1.5e300, 1e21, 123456789012345680.0,
            .leastNonzeroMagnitude,
        ])
        try Self.expectSameText([Float(0.1), Float(3), Float(1e-10)])
        try Self.expectSameText([Decimal(string: "249.50")!, Decimal(0), Decimal(string: "-0.001")!])
    }

    @Test("NaN and infinities are refused, with the path to them")
    func nonFinite() {
        struct Reading: Encodable { var values: [Double] }
        for value in [Double.nan, .infinity, -.infinity] {
            #expect(throws: EncodingError.self) { try ContractJSONEncoder().encode(Reading(values: [1, value])) }
        }
        do {
            _ = try ContractJSONEncoder().encode(Reading(values: [1, .nan]))
        } catch EncodingError.invalidValue(_, let context) {
            #expect(context.codingPath.map(\.stringValue) == ["values", "Index 1"])
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    struct Everything: Codable {
        var flag: Bool
        var optional: String?
        var missing: Int?
        var date: Date
        var data: Data
        var url: URL
        var nested: [String: [Int]]
        var byNumber: [Int: String]
        var matrix: [[Double]]
        var optionals: [String?]
        var empty: [String: String]
        var emptyArray: [Int]
    }

    @Test("dates, data, URLs, optionals, dictionaries keyed by strings and by numbers, nested arrays")
    func containers() throws {
        let value = Everything(
            flag: true, optional: "here", missing: nil, date: Date(timeIntervalSince1970: 1_795_000_000.5),
            data: Data([0, 1, 2, 250, 255]), url: URL(string: "https://example.com/a/b?c=d&e=f")!,
            nested: ["b": [2, 3], "a": [], "B": [1], "aa": [0]], byNumber: [10: "ten", 2: "two", -1: "minus one"],
            matrix: [[1, 2.5], [], [-3]], optionals: ["x", nil, "z"], empty: [:], emptyArray: []
        )
        try Self.expectSameText(value)
        try Self.expectSameText([value, value])
        try Self.expectSameText(["top": Date(timeIntervalSince1970: 0)])
    }

    @Test("top-level fragments")
    func fragments() throws {
        try Self.expectSameText("text")
        try Self.expectSameText(42)
        try Self.expectSameText(true)
        try Self.expectSameText(Optional<Int>.none)
        try Self.expectSameText(Date(timeIntervalSince1970: 1))
    }

    /// Encodes members in an order of its own, one key twice, and uses nested containers and a super encoder.
    struct Handwritten: Encodable {
        enum Keys: String, CodingKey { case zeta, alpha, nested, list, parent, Zulu }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode("first", forKey: .zeta)
            try container.encode(1, forKey: .alpha)
            try container.encode("second", forKey: .zeta)
            var nested = container.nestedContainer(keyedBy: Keys.self, forKey: .nested)
            try nested.encode(true, forKey: .Zulu)
            try nested.encodeNil(forKey: .alpha)
            var list = container.nestedUnkeyedContainer(forKey: .list)
            try list.encode("one")
            var inner = list.nestedContainer(keyedBy: Keys.self)
            try inner.encode(2.5, forKey: .alpha)
            try list.encodeNil()
            let parent = container.superEncoder(forKey: .parent)
            var parentValue = parent.singleValueContainer()
            try parentValue.encode(["from", "super"])
        }
    }

    /// Asks for the nested containers at one key twice, after a value was encoded there.
    struct NestedTwice: Encodable {
        enum Keys: String, CodingKey { case meta, list, plain, x, y }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            var first = container.nestedContainer(keyedBy: Keys.self, forKey: .meta)
            try first.encode(1, forKey: .x)
            var second = container.nestedContainer(keyedBy: Keys.self, forKey: .meta)
            try second.encode(2, forKey: .y)
            var list = container.nestedUnkeyedContainer(forKey: .list)
            try list.encode("a")
            var more = container.nestedUnkeyedContainer(forKey: .list)
            try more.encode("b")
            try container.encode(["x": 0], forKey: .plain)
            var onPlain = container.nestedContainer(keyedBy: Keys.self, forKey: .plain)
            try onPlain.encode(3, forKey: .y)
        }
    }

    /// Arrays nested `depth` deep around an empty one.
    struct Nested: Encodable {
        var depth: Int

        func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            if depth > 1 { try container.encode(Nested(depth: depth - 1)) }
        }
    }

    /// Encodes nothing at all.
    struct Silent: Encodable {
        func encode(to encoder: any Encoder) throws {}
    }

    @Test("members in any order, a key encoded twice, nested and super encoders, a value that encodes nothing")
    func handwritten() throws {
        try Self.expectSameText(Handwritten())
        try Self.expectSameText(["inside": Silent()])
        #expect(throws: EncodingError.self) { try ContractJSONEncoder().encode(Silent()) }
        #expect(throws: EncodingError.self) { try Self.foundationEncoder().encode(Silent()) }
        try Self.expectSameText(NestedTwice())
    }

    @Test("nesting is refused from the same depth as Foundation refuses it", arguments: [510, 511, 512, 513])
    func depth(levels: Int) throws {
        let foundation = try? Self.foundationEncoder().encode(Nested(depth: levels))
        let written = try? ContractJSONEncoder().encode(Nested(depth: levels))
        #expect(written == foundation)
    }

    @Test("an error names the path to the value, through nested and super encoders")
    func errorPaths() {
        struct Inner: Encodable {
            enum Keys: String, CodingKey { case parent, value }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: Keys.self)
                var parent = container.superEncoder(forKey: .parent).container(keyedBy: Keys.self)
                try parent.encode(Double.nan, forKey: .value)
            }
        }
        for encode in [
            { try ContractJSONEncoder().encode(["outer": [Inner()]]) },
            { try Self.foundationEncoder().encode(["outer": [Inner()]]) },
        ] as [() throws -> Data] {
            do {
                _ = try encode()
                Issue.record("NaN was encoded")
            } catch EncodingError.invalidValue(_, let context) {
                #expect(context.codingPath.map(\.stringValue) == ["outer", "Index 0", "parent", "value"])
            } catch {
                Issue.record("unexpected \(error)")
            }
        }
    }
}
