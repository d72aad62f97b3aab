import Foundation
import Logging
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

    struct Note: Codable, Equatable, Sendable {
        var text: String
        var at: Date
    }

    @Test("a typed emit's packet holds the coding's JSON as written, and reads back as the payload")
    func typedEventPacket() throws {
        let namespace = SocketIOServer(store: InMemoryRealtimeStore(), logger: Logger(label: "test")).namespace("/chat")
        let note = Note(text: "caf\u{E9} \"5/6\"\n\\", at: Date(timeIntervalSince1970: 1_795_774_500.25))
        let packet = try namespace.eventPacket("note", encoding: note)
        #expect(packet == #"2/chat,["note",{"at":"2026-11-27T10:15:00.250Z","text":"café \"5/6\"\n\\"}]"#)
        let decoded = try SocketIOPacket.decode(packet, sentByServer: true)
        let payload = try #require(decoded.data?[1])
        #expect(try payload.decode(as: Note.self, with: .standard) == note)
        #expect(
            packet
                == namespace.eventPacket("note", SocketIOArguments([try JSONValue(encoding: note, with: .standard)]))
                .text)
    }

    @Test("a coding that writes tabs or line breaks between tokens has its packets written compactly")
    func prettyCodingIsCompacted() throws {
        var configuration = SocketIOConfiguration()
        configuration.coding = JSONCoding(
            encode: { value in
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                return try encoder.encode(value)
            },
            decode: { type, data in try JSONDecoder().decode(type, from: data) })
        let server = SocketIOServer(
            configuration: configuration, store: InMemoryRealtimeStore(), logger: Logger(label: "test"))
        let packet = try server.namespace("/").eventPacket("tab", encoding: ["a\tb": [1, 2]])
        #expect(packet == #"2["tab",{"a\tb":[1,2]}]"#)
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
