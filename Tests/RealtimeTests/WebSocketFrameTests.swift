import RealtimeTesting
import TestSupport
import Testing

@testable import Realtime

/// The WebSocket frame layer under Engine.IO (``EngineWebSocketHandler``), on a raw socket against the conformance
/// server's `/engine.io/` echo: fragments, control frames, and the close handshake, as RFC 6455 has them.
@Suite("Engine.IO WebSocket frames")
struct WebSocketFrameTests {
    static let text: UInt8 = 0x1
    static let binary: UInt8 = 0x2
    static let continuation: UInt8 = 0x0
    static let ping: UInt8 = 0x9
    static let pong: UInt8 = 0xA

    /// A raw WebSocket with its Engine.IO session open (the open packet read).
    static func openSession(_ server: ConformanceFixture) throws -> RawWebSocket {
        let socket = try RawWebSocket(port: server.port, path: "/engine.io/?EIO=4&transport=websocket")
        let open = next(socket)
        guard let open, open.opcode == text, open.payload.first == UInt8(ascii: "0") else {
            throw ProtocolMismatch("no open packet")
        }
        return socket
    }

    /// The next frame that is not an Engine.IO ping (`2`, every 300 ms from the conformance server).
    static func next(_ socket: RawWebSocket) -> (opcode: UInt8, fin: Bool, payload: [UInt8])? {
        while let frame = socket.nextFrame() {
            if frame.opcode == text, frame.payload == [UInt8(ascii: "2")] { continue }
            return frame
        }
        return nil
    }

    /// The close code of a close frame's payload.
    static func closeCode(_ frame: (opcode: UInt8, fin: Bool, payload: [UInt8])?) -> Int? {
        guard let frame, frame.opcode == RawWebSocket.closeOpcode, frame.payload.count >= 2 else { return nil }
        return Int(frame.payload[0]) << 8 | Int(frame.payload[1])
    }

    @Test("a message in fragments is one message, with a ping between them answered by a pong with its payload")
    func fragments() async throws {
        try await ConformanceFixture.run(path: "/engine.io", pingTimeout: .seconds(20)) { server in
            let socket = try Self.openSession(server)
            defer { socket.close() }
            socket.send(opcode: Self.text, fin: false, payload: Array("4hel".utf8))
            socket.send(opcode: Self.ping, payload: [7, 8, 9])
            let pong = Self.next(socket)
            #expect(pong?.opcode == Self.pong)
            #expect(pong?.payload == [7, 8, 9])
            socket.send(opcode: Self.continuation, fin: false, payload: Array("lo wo".utf8))
            socket.send(opcode: Self.continuation, payload: Array("rld".utf8))
            let echo = try #require(Self.next(socket))
            #expect(echo.opcode == Self.text)
            #expect(String(decoding: echo.payload, as: UTF8.self) == "4hello world")

            socket.send(opcode: Self.binary, fin: false, payload: [1, 2])
            socket.send(opcode: Self.continuation, payload: [3])
            let binaryEcho = try #require(Self.next(socket))
            #expect(binaryEcho.opcode == Self.binary)
            #expect(binaryEcho.payload == [1, 2, 3])
        }
    }

    @Test(
        "protocol violations close with their code: bad UTF-8 1007, a stray continuation 1002, a reserved bit 1002",
        arguments: [
            (opcode: text, payload: [UInt8(ascii: "4"), 0xC3, 0x28], code: 1007),
            (opcode: continuation, payload: Array("4x".utf8), code: 1002),
            (opcode: text | 0x40, payload: Array("4x".utf8), code: 1002),
        ])
    func violations(opcode: UInt8, payload: [UInt8], code: Int) async throws {
        try await ConformanceFixture.run(path: "/engine.io", pingTimeout: .seconds(20)) { server in
            let socket = try Self.openSession(server)
            defer { socket.close() }
            socket.send(opcode: opcode, payload: payload)
            #expect(Self.closeCode(Self.next(socket)) == code)
        }
    }

    @Test(
        "a message over maxPayload closes with 1009, in fragments or as one frame refused by its head; other sessions keep being served",
        arguments: [false, true])
    func oversized(asOneFrame: Bool) async throws {
        try await ConformanceFixture.run(path: "/engine.io", pingTimeout: .seconds(20)) { server in
            let socket = try Self.openSession(server)
            defer { socket.close() }
            let other = try Self.openSession(server)
            defer { other.close() }
            if asOneFrame {
                socket.sendHead(opcode: Self.text, length: 1_000_001)
            } else {
                let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 60_000)
                socket.send(opcode: Self.text, fin: false, payload: [UInt8(ascii: "4")] + chunk)
                // maxPayload is 1,000,000 bytes: the seventeenth chunk passes it.
                for _ in 0..<17 { socket.send(opcode: Self.continuation, fin: false, payload: chunk) }
            }
            #expect(Self.closeCode(Self.next(socket)) == 1009)
            other.send("4still here")
            #expect(Self.next(other).map { String(decoding: $0.payload, as: UTF8.self) } == "4still here")
        }
    }

    @Test(
        "the client's close frame is answered (1000, or 1002 for a code a peer may not send) and the connection ends",
        arguments: [
            (payload: [0x03, 0xE9], answer: 1000),  // 1001 going away
            (payload: [], answer: 1000),
            (payload: [0x03, 0xED], answer: 1002),  // 1005 is never sent
            (payload: [0x03], answer: 1002),
        ] as [(payload: [UInt8], answer: Int)])
    func clientClose(payload: [UInt8], answer: Int) async throws {
        try await ConformanceFixture.run(path: "/engine.io", pingTimeout: .seconds(20)) { server in
            let socket = try Self.openSession(server)
            defer { socket.close() }
            socket.send(opcode: RawWebSocket.closeOpcode, payload: payload)
            #expect(Self.closeCode(Self.next(socket)) == answer)
            // Nothing more comes, not even the pings of the session (every 300 ms): it ended with its connection.
            #expect(socket.nextFrame() == nil, "the connection ended")
        }
    }

    /// A raw WebSocket upgrading polling session `sid`, its probe answered.
    static func probe(_ server: ConformanceFixture, sid: String) throws -> RawWebSocket {
        let socket = try RawWebSocket(port: server.port, path: "/engine.io/?EIO=4&transport=websocket&sid=\(sid)")
        socket.send("2probe")
        guard let answer = next(socket), answer.payload == Array("3probe".utf8) else {
            socket.close()
            throw ProtocolMismatch("no 3probe")
        }
        return socket
    }

    @Test("a '5' that comes after the polling session closed ends the WebSocket at once")
    func upgradeOfAClosedSession() async throws {
        try await ConformanceFixture.run(path: "/engine.io", pingTimeout: .seconds(20)) { server in
            let sid = try await server.openPollingSession()
            let socket = try Self.probe(server, sid: sid)
            defer { socket.close() }
            #expect(try await server.post(server.pollingURL("&sid=\(sid)"), "1").status == 200)
            socket.send("5")
            #expect(Self.closeCode(Self.next(socket)) == 1000)
        }
    }

    @Test("a WebSocket that breaks the protocol after its probe leaves the session on polling, still served")
    func failedUpgradeKeepsPolling() async throws {
        try await ConformanceFixture.run(path: "/engine.io", pingTimeout: .seconds(20)) { server in
            let sid = try await server.openPollingSession()
            let socket = try Self.probe(server, sid: sid)
            defer { socket.close() }
            socket.send(opcode: Self.text, payload: [0xC3, 0x28])
            #expect(Self.closeCode(Self.next(socket)) == 1007)
            // An upgrade left probing would answer every poll with a noop at once, and never with the echo.
            #expect(try await server.post(server.pollingURL("&sid=\(sid)"), "4hello").status == 200)
            try await eventually(timeout: .seconds(3), "the echo arrives by polling") {
                let answer = try await server.get(server.pollingURL("&sid=\(sid)"))
                return answer.status == 200 && answer.body.split(separator: "\u{1e}").contains("4hello")
            }
        }
    }
}
