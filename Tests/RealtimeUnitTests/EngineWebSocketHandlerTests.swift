import Logging
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Synchronization
import Testing

@testable import Realtime

/// `EngineWebSocketHandler` byte by byte, with no socket: the client's masked frames written into an
/// `EmbeddedChannel` behind NIO's frame decoder and encoder, the bytes the server writes back read off it.
@Suite("Engine.IO WebSocket handler, byte by byte")
struct EngineWebSocketHandlerTests {
    /// Records the messages the engine hands up.
    final class Recorder: EngineHandler {
        let messages = Mutex<[EngineMessage]>([])
        func opened(_ session: EngineSession) {}
        func receive(_ message: EngineMessage, from session: EngineSession) throws(EngineProtocolError) {
            messages.withLock { $0.append(message) }
        }
        func closed(_ session: EngineSession, reason: EngineCloseReason) async {}
    }

    /// A WebSocket connection that opened an Engine.IO session, its open packet already read.
    struct Connection {
        let channel: EmbeddedChannel
        let recorder: Recorder
        let session: EngineSession

        init(maxPayload: Int = 1_000_000) throws {
            var configuration = EngineConfiguration()
            configuration.maxPayload = maxPayload
            recorder = Recorder()
            channel = EmbeddedChannel()
            let server = EngineServer(configuration: configuration, handler: recorder, logger: Logger(label: "test"))
            let handler = EngineWebSocketHandler(server: server, channel: channel)
            try channel.pipeline.syncOperations.addHandlers([
                ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maxPayload)), WebSocketFrameEncoder(), handler,
            ])
            let role = server.webSocketRole(
                for: .openSession(server, query: [:], headers: [:]), writer: handler, peer: nil)
            let opened: EngineSession? = if case .session(let session) = role { session } else { nil }
            session = try #require(opened, "no session: \(role)")
            handler.start(role)
            let open = try written()
            let isOpenPacket = open.count > 2 && open[0] == 0x81 && Array(open[2..<4]) == Array("0{".utf8)
            try #require(isOpenPacket, "not an open packet: \(open)")
        }

        /// Writes the bytes a client sends.
        func receive(_ bytes: [UInt8]) throws {
            try channel.writeInbound(ByteBuffer(bytes: bytes))
        }

        /// Every byte the server wrote since the last call, after running what the event loop has queued.
        func written() throws -> [UInt8] {
            channel.embeddedEventLoop.run()
            var bytes: [UInt8] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { bytes += buffer.readableBytesView }
            return bytes
        }
    }

    /// A client frame: masked, as RFC 6455 requires of clients. `first` is the first byte (FIN, RSV bits, opcode).
    static func clientFrame(_ first: UInt8, _ payload: [UInt8], mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]) -> [UInt8] {
        precondition(payload.count < 126)
        return [first, 0x80 | UInt8(payload.count)] + mask
            + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    }

    /// A close frame as the server sends it: unmasked, with `code`.
    static func serverClose(_ code: UInt16) -> [UInt8] { [0x88, 0x02, UInt8(code >> 8), UInt8(code & 0xFF)] }

    @Test(
        "a text frame with an Engine.IO message reaches the engine's handler; the server's message goes out as a text frame"
    )
    func messages() throws {
        let connection = try Connection()
        try connection.receive(Self.clientFrame(0x81, Array("4hello".utf8)))
        #expect(connection.recorder.messages.withLock { $0 } == [.text("hello")])
        connection.session.send([EnginePacket(.message, "hi")])
        #expect(try connection.written() == [0x81, 0x03] + Array("4hi".utf8))
    }

    @Test("a message in fragments is put together; a ping between them is answered with a pong of its payload")
    func fragments() throws {
        let connection = try Connection()
        try connection.receive(Self.clientFrame(0x01, Array("4he".utf8)))
        try connection.receive(Self.clientFrame(0x89, Array("ok".utf8)))
        #expect(try connection.written() == [0x8A, 0x02] + Array("ok".utf8))
        try connection.receive(Self.clientFrame(0x80, Array("llo".utf8)))
        #expect(connection.recorder.messages.withLock { $0 } == [.text("hello")])
    }

    @Test("the client's close frame is answered with 1000 and the socket closes")
    func closeAnswered() throws {
        let connection = try Connection()
        try connection.receive(Self.clientFrame(0x88, [0x03, 0xE8]))
        #expect(try connection.written() == Self.serverClose(1000))
        #expect(!connection.channel.isActive)
        #expect(connection.session.closeReason == .transportClose)
    }

    @Test("a close frame with a code a peer may not send (1005) is answered with 1002")
    func closeWithReservedCode() throws {
        let connection = try Connection()
        try connection.receive(Self.clientFrame(0x88, [0x03, 0xED]))
        #expect(try connection.written() == Self.serverClose(1002))
    }

    @Test("a frame with a reserved bit set is a protocol error: 1002, and the session ends")
    func reservedBit() throws {
        let connection = try Connection()
        try connection.receive(Self.clientFrame(0xC1, Array("4x".utf8)))
        #expect(try connection.written() == Self.serverClose(1002))
        #expect(connection.session.closeReason == .protocolError)
        #expect(connection.recorder.messages.withLock { $0 }.isEmpty)
    }

    @Test("text that is not UTF-8 is answered with 1007")
    func invalidText() throws {
        let connection = try Connection()
        try connection.receive(Self.clientFrame(0x81, [0x34, 0xC3, 0x28]))
        #expect(try connection.written() == Self.serverClose(1007))
    }

    @Test("fragments that add up to more than maxPayload are answered with 1009 before anything is handed up")
    func tooLargeInFragments() throws {
        let connection = try Connection(maxPayload: 8)
        try connection.receive(Self.clientFrame(0x01, Array("4abcd".utf8)))
        try connection.receive(Self.clientFrame(0x80, Array("efgh".utf8)))
        #expect(try connection.written() == Self.serverClose(1009))
        #expect(connection.recorder.messages.withLock { $0 }.isEmpty)
    }

    @Test("a fragmented ping, refused by NIO's decoder, is answered with 1002 and the socket closes")
    func fragmentedControlFrame() throws {
        let connection = try Connection()
        try? connection.receive(Self.clientFrame(0x09, Array("ok".utf8)))
        #expect(try connection.written() == Self.serverClose(1002))
        #expect(!connection.channel.isActive)
    }

    @Test("one frame longer than maxPayload, refused by NIO's decoder, is answered with 1009")
    func frameTooLong() throws {
        let connection = try Connection(maxPayload: 8)
        try? connection.receive(Self.clientFrame(0x81, Array("4abcdefghij".utf8)))
        #expect(try connection.written() == Self.serverClose(1009))
    }
}
