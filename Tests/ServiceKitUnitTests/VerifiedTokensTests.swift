import Foundation
import ServiceKit
import Testing

@Suite("Verified tokens")
struct VerifiedTokensTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let rider = Identity(userId: "r-1", role: .rider)

    static func verified(from: Date? = nil, until: Date) -> VerifiedTokens.Verified {
        VerifiedTokens.Verified(identity: rider, validFrom: from, expiresAt: until)
    }

    @Test("a token is found only inside the times it holds, byte for byte, and for the key set it was verified with")
    func timesBytesAndKeySet() {
        let tokens = VerifiedTokens()
        tokens.remember("a", Self.verified(from: Self.now - 5, until: Self.now + 10), keysGeneration: 0)
        #expect(tokens.accepted("a", keysGeneration: 0, now: Self.now + 9.9)?.identity == Self.rider)
        #expect(tokens.accepted("a", keysGeneration: 0, now: Self.now + 10) == nil, "expired")
        #expect(tokens.accepted("a", keysGeneration: 0, now: Self.now - 5.1) == nil, "before its nbf or iat")
        #expect(tokens.accepted("a", keysGeneration: 0, now: Self.now - 5) != nil)

        tokens.remember("caf\u{E9}", Self.verified(until: Self.now + 10), keysGeneration: 0)
        #expect(tokens.accepted("cafe\u{301}", keysGeneration: 0, now: Self.now) == nil, "canonically equal only")

        #expect(tokens.accepted("a", keysGeneration: 1, now: Self.now) == nil)
        #expect(tokens.accepted("a", keysGeneration: 0, now: Self.now) == nil, "forgotten once a new key set is held")
        #expect(tokens.count == 0)
        tokens.remember("b", Self.verified(until: Self.now + 10), keysGeneration: 0)
        #expect(tokens.count == 0, "verified with a key set older than the one held: not kept")
        #expect(tokens.accepted("unknown", keysGeneration: 1, now: Self.now) == nil)
    }

    @Test("at most its capacity, and tokens in use are kept while new ones come")
    func bounded() {
        let tokens = VerifiedTokens()
        let capacity = VerifiedTokens.capacity
        tokens.remember("in-use", Self.verified(until: Self.now + 100), keysGeneration: 0)
        for index in 0..<(capacity * 3) {
            tokens.remember("one-off-\(index)", Self.verified(until: Self.now + 100), keysGeneration: 0)
            #expect(tokens.count <= capacity)
            if index % 1000 == 0 {
                #expect(tokens.accepted("in-use", keysGeneration: 0, now: Self.now) != nil, "after \(index)")
            }
        }
        #expect(tokens.accepted("one-off-0", keysGeneration: 0, now: Self.now) == nil, "the oldest went")
    }
}
