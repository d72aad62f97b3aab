import Contracts
import Foundation
import Realtime
import RealtimePlatform
import Testing

@Suite("The services' settings of the protocol library")
struct SocketErrorMappingTests {
    struct Stamped: Codable, Equatable, Sendable { var at: Date }
    struct Join: Codable, Sendable { var orderId: String }
    struct Refusal: CodedError { var code: ErrorCode = .chatClosed, message = "the chat is closed" }

    @Test("the library's error codes are the platform's")
    func codes() {
        let pairs: [(SocketIOErrorCode, ErrorCode)] = [
            (.validationFailed, .validationFailed), (.unauthorized, .unauthorized), (.forbidden, .forbidden),
            (.rateLimited, .rateLimited), (.tokenExpired, .tokenExpired), (.internalError, .internalError),
        ]
        for (socket, platform) in pairs { #expect(socket == SocketIOErrorCode(platform)) }
    }

    @Test("the library's standard coding and the contracts' write the same dates")
    func sameDates() throws {
        for seconds in [0, 1_795_774_500.25, 1_795_774_500.999, -86_400.5] {
            let value = Stamped(at: Date(timeIntervalSince1970: seconds))
            #expect(try JSONValue(encoding: value, with: .standard) == JSONValue(encoding: value, with: .contracts))
        }
    }

    @Test("a coded error is answered with its code; an undecodable payload as over HTTP")
    func answers() throws {
        let coded = try #require(SocketIOConfiguration.describePlatformError(Refusal()))
        #expect(coded.code == SocketIOErrorCode(ErrorCode.chatClosed) && coded.message == "the chat is closed")
        let payload = try JSONValue.parse(#"{"order":"o-1"}"#)
        let decodingError = try #require(throws: (any Error).self) {
            try payload.decode(as: Join.self, with: .contracts)
        }
        let answer = try #require(
            SocketIOConfiguration.describePlatformError(SocketIOPayloadError(event: "join", underlying: decodingError)))
        #expect(answer.code == .validationFailed && answer.message == "missing field 'orderId'")
        let nul = try JSONValue.parse(#"{"orderId":"a\u0000b"}"#)
        let nulError = try #require(throws: (any Error).self) { try nul.decode(as: Join.self, with: .contracts) }
        let nulAnswer = SocketIOConfiguration.describePlatformError(
            SocketIOPayloadError(event: "join", underlying: nulError))
        #expect(nulAnswer?.code == SocketIOErrorCode(ErrorCode.invalidCharacter))
        #expect(SocketIOConfiguration.describePlatformError(CancellationError()) == nil)
    }
}
