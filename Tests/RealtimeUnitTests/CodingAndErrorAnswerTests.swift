import Foundation
import Realtime
import Testing

@Suite("The library's JSON coding and error answers")
struct CodingAndErrorAnswerTests {
    struct Stamped: Codable, Equatable, Sendable { var at: Date }

    @Test("standard coding writes dates as UTC ISO-8601 with milliseconds and reads them with or without the fraction")
    func standardDates() throws {
        let date = Date(timeIntervalSince1970: 1_795_774_500.25)
        let value = try JSONValue(encoding: Stamped(at: date), with: .standard)
        #expect(value.serialized == #"{"at":"2026-11-27T10:15:00.250Z"}"#)
        #expect(try value.decode(as: Stamped.self, with: .standard) == Stamped(at: date))
        let whole = try JSONValue.parse(#"{"at":"2026-11-27T10:15:00Z"}"#)
        #expect(try whole.decode(as: Stamped.self, with: .standard).at == Date(timeIntervalSince1970: 1_795_774_500))
        #expect(throws: DecodingError.self) {
            try JSONValue.parse(#"{"at":"yesterday"}"#).decode(as: Stamped.self, with: .standard)
        }
    }

    @Test("the library answers its own errors and leaves every other error to the application")
    func protocolErrors() throws {
        let refused = SocketIOEventError(code: .forbidden, message: "no")
        #expect(SocketIOConfiguration.describeProtocolError(refused)?.code == .forbidden)
        #expect(
            refused.body.serialized == #"{"error":{"code":"FORBIDDEN","message":"no"}}"#)
        let undecodable = SocketIOPayloadError(event: "join", underlying: CocoaError(.coderReadCorrupt))
        let answer = try #require(SocketIOConfiguration.describeProtocolError(undecodable))
        #expect(answer.code == .validationFailed)
        #expect(answer.message.hasPrefix("the join payload does not have the expected shape"))
        #expect(SocketIOConfiguration.describeProtocolError(CancellationError()) == nil)
    }
}
