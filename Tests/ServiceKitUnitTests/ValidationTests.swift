import Foundation
import ServiceKit
import Testing

@Suite("Field validation")
struct ValidationTests {
    @Test("limits count characters and UTF-8 bytes: one character with many combining accents does not fit")
    func bytesAndCharacters() throws {
        #expect(Validate.fits("abc", maximumCharacters: 3))
        #expect(!Validate.fits("abcd", maximumCharacters: 3))
        #expect(Validate.fits("😀😀😀", maximumCharacters: 3))
        let oneCharacter = "a" + String(repeating: "\u{301}", count: 1000)
        #expect(oneCharacter.count == 1)
        #expect(!Validate.fits(oneCharacter, maximumCharacters: 200))
        #expect(throws: APIError.self) { try Validate.text(oneCharacter, "line1") }
        #expect(try Validate.text("  Ravi  ", "name") == "Ravi")
    }

    @Test("identifiers are at most 128 bytes")
    func identifiers() throws {
        #expect(try Validate.identifier("order-1:a@b.c_d", "id") == "order-1:a@b.c_d")
        #expect(throws: APIError.self) { try Validate.identifier("a" + String(repeating: "\u{301}", count: 200), "id") }
        #expect(throws: APIError.self) { try Validate.identifier(String(repeating: "é", count: 65), "id") }
        #expect(throws: APIError.self) { try Validate.identifier("", "id") }
        #expect(throws: APIError.self) { try Validate.identifier("a b", "id") }
    }

    @Test("amounts: in range, at most two decimals", arguments: ["0", "12.3", "12.30", "249.5", "10000000"])
    func validAmounts(text: String) throws {
        try Validate.amount(Decimal(string: text)!, "totalAmount", maximum: 10_000_000)
    }

    @Test(
        "amounts: negative, too large or a third decimal are refused",
        arguments: ["-1", "12.345", "0.001", "10000000.01"])
    func invalidAmounts(text: String) {
        #expect(throws: APIError.self) {
            try Validate.amount(Decimal(string: text)!, "totalAmount", maximum: 10_000_000)
        }
    }
}
