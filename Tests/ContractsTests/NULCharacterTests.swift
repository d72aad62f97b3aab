import Contracts
import Foundation
import Testing

@Suite("NUL characters in JSON text")
struct NULCharacterTests {
    @Test(
        "a NUL byte or a \\u0000 escape inside a string is found",
        arguments: [#"{"a":"x\u0000y"}"#, #"["\u0000"]"#, #"{"k\u0000":1}"#, "{\"a\":\"x\0\"}", #"{"a":"\\\u0000"}"#]
    )
    func found(json: String) {
        #expect(throws: NULCharacterError.self) { try NULCharacterError.check(Data(json.utf8)) }
    }

    @Test(
        "escaped backslashes, other escapes and the text u0000 are not NUL",
        arguments: [
            #"{"a":"\\u0000"}"#, #"{"a":"\u0001\u1000"}"#, #"{"a":"u0000"}"#, #"{"a":"\\"}"#, "{}", #"{"a":"\"#,
        ]
    )
    func notFound(json: String) throws {
        try NULCharacterError.check(Data(json.utf8))
    }

    @Test("decoding refuses a string with NUL before it reaches a store")
    func decodeRefuses() {
        struct Named: Decodable { var name: String }
        #expect(throws: NULCharacterError.self) {
            try ContractCoding.decode(Named.self, from: Data(#"{"name":"a\u0000"}"#.utf8))
        }
    }
}
