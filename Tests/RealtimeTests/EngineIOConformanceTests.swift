import Foundation
import Realtime
import RealtimeTesting
import TestSupport
import Testing

/// The cases of the public Engine.IO v4 test suite (socketio/socket.io docs/engine.io-protocol/v4-test-suite),
/// against the conformance server's `/engine.io/` echo server: ping every 300 ms, 200 ms to answer.
@Suite("Engine.IO v4 protocol", .serialized, .timeLimit(.minutes(2)))
struct EngineIOConformanceTests {
    static let openKeys: Set<String> = ["sid", "upgrades", "pingInterval", "pingTimeout", "maxPayload"]

    static func checkOpenPacket(_ text: String, upgrades: [String]) throws {
        #expect(text.hasPrefix("0"))
        let open = try JSONValue.parse(String(text.dropFirst()))
        guard case .object(let object) = open else { throw ProtocolMismatch("open packet is not an object") }
        #expect(Set(object.entries.map(\.key)) == openKeys)
        #expect(open["sid"]?.stringValue != nil)
        #expect(open["upgrades"] == .array(upgrades.map { .string($0) }))
        #expect(open["pingInterval"] == .number("300"))
        #expect(open["pingTimeout"] == .number("200"))
        #expect(open["maxPayload"] == .number("1000000"))
    }

    // MARK: handshake

    @Test("HTTP long-polling: successfully opens a session")
    func pollingHandshake() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            let answer = try await server.get(server.pollingURL())
            #expect(answer.status == 200)
            try Self.checkOpenPacket(answer.body, upgrades: ["websocket"])
        }
    }

    @Test("HTTP long-polling: invalid EIO, transport or method get 400")
    func pollingHandshakeRefusals() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            for url in [
                server.httpBase + "?transport=polling", server.httpBase + "?EIO=abc&transport=polling",
                server.httpBase + "?EIO=4",
                server.httpBase + "?EIO=4&transport=abc",
            ] {
                #expect(try await server.get(url).status == 400, "\(url)")
            }
            #expect(try await server.request(.POST, server.pollingURL()).status == 400)
            #expect(try await server.request(.PUT, server.pollingURL()).status == 400)
            let unknown = try await server.get(server.pollingURL("&sid=nope"))
            #expect(unknown.status == 400)
            #expect(unknown.body == #"{"code":1,"message":"Session ID unknown"}"#)
        }
    }

    @Test("WebSocket: successfully opens a session")
    func webSocketHandshake() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            try await withTestWebSocket(server.webSocketURL()) { socket in
                let frame = try await socket.next()
                try Self.checkOpenPacket(frame.textContent ?? "", upgrades: [])
                socket.close()
            }
        }
    }

    @Test("WebSocket: invalid EIO or transport ends in close")
    func webSocketHandshakeRefusals() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            for query in ["?transport=websocket", "?EIO=abc&transport=websocket", "?EIO=4", "?EIO=4&transport=abc"] {
                try await withTestWebSocket(server.webSocketBase + query) { socket in
                    try await socket.expectClose()
                }
            }
        }
    }

    // MARK: message

    @Test("HTTP long-polling: one, several, and text plus binary packets echo back")
    func pollingMessages() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            for payload in ["4hello", "4test1\u{1E}4test2\u{1E}4test3", "4hello\u{1E}bAQIDBA=="] {
                let sid = try await server.openPollingSession()
                let post = try await server.post(server.pollingURL("&sid=\(sid)"), payload)
                #expect(post.status == 200)
                #expect(post.body == "ok")
                let poll = try await server.get(server.pollingURL("&sid=\(sid)"))
                #expect(poll.status == 200)
                #expect(poll.body == payload)
            }
        }
    }

    @Test("HTTP long-polling: an invalid packet closes the session")
    func pollingInvalidPacket() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            let sid = try await server.openPollingSession()
            #expect(try await server.post(server.pollingURL("&sid=\(sid)"), "abc").status == 400)
            #expect(try await server.get(server.pollingURL("&sid=\(sid)")).status == 400)
        }
    }

    @Test("HTTP long-polling: duplicate poll requests close the session")
    func pollingDuplicatePoll() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            let sid = try await server.openPollingSession()
            // The two polls race: whichever the server registered first waits and is answered with the close
            // packet, the other is the duplicate (the suite assumes they arrive in the order they were sent).
            async let first = server.get(server.pollingURL("&sid=\(sid)"))
            async let second = server.get(server.pollingURL("&sid=\(sid)&t=burst"))
            let answers = [try await first, try await second]
            let closed = answers.filter { $0.status == 200 }
            #expect(closed.count == 1, "\(answers.map(\.status))")
            #expect(closed.first?.body == "1")
            #expect(answers.filter { [400, 500].contains($0.status) }.count == 1, "\(answers.map(\.status))")
            #expect(try await server.get(server.pollingURL("&sid=\(sid)")).status == 400)
        }
    }

    @Test("HTTP long-polling: a cancelled poll closes the session")
    func pollingCancelledPoll() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            let sid = try await server.openPollingSession()
            let poll = Task { try? await server.get(server.pollingURL("&sid=\(sid)")) }
            try await Task.sleep(for: .milliseconds(20))
            poll.cancel()
            _ = await poll.value
            try await eventually(timeout: .seconds(2), "the session to be gone") {
                try await server.get(server.pollingURL("&sid=\(sid)")).status == 400
            }
        }
    }

    @Test("WebSocket: text and binary packets echo back; an invalid packet closes")
    func webSocketMessages() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            try await withTestWebSocket(server.webSocketURL()) { socket in
                _ = try await socket.next()
                socket.send("4hello")
                #expect(try await socket.next() == .text("4hello"))
                socket.send(binary: [1, 2, 3, 4])
                #expect(try await socket.next() == .binary([1, 2, 3, 4]))
                socket.send("abc")
                try await socket.expectClose()
            }
        }
    }

    // MARK: heartbeat

    /// Answered pings run with a 2 s pingTimeout: under parallel suites a pong can take longer than the suite's
    /// 200 ms to be read, and a missed pong is what the next test checks, not this one.
    @Test("HTTP long-polling: sends ping and receives pong, three times")
    func pollingHeartbeat() async throws {
        try await ConformanceFixture.run(path: "/engine.io", pingTimeout: .seconds(2)) { server in
            let sid = try await server.openPollingSession()
            for _ in 0..<3 {
                let poll = try await server.get(server.pollingURL("&sid=\(sid)"))
                #expect(poll.status == 200)
                #expect(poll.body == "2")
                #expect(try await server.post(server.pollingURL("&sid=\(sid)"), "3").status == 200)
            }
        }
    }

    @Test("HTTP long-polling: a missed pong closes the session by pingInterval + pingTimeout")
    func pollingPingTimeout() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            let sid = try await server.openPollingSession()
            // pingInterval + pingTimeout is 500 ms; the margin absorbs a busy machine's timer delays.
            try await Task.sleep(for: .milliseconds(700))
            #expect(try await server.get(server.pollingURL("&sid=\(sid)")).status == 400)
        }
    }

    @Test("WebSocket: sends ping and receives pong, three times")
    func webSocketHeartbeat() async throws {
        try await ConformanceFixture.run(path: "/engine.io", pingTimeout: .seconds(2)) { server in
            try await withTestWebSocket(server.webSocketURL()) { socket in
                _ = try await socket.next()
                for _ in 0..<3 {
                    #expect(try await socket.next() == .text("2"))
                    socket.send("3")
                }
                socket.close()
            }
        }
    }

    @Test("WebSocket: a missed pong closes")
    func webSocketPingTimeout() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            try await withTestWebSocket(server.webSocketURL()) { socket in
                _ = try await socket.next()
                #expect(try await socket.next() == .text("2"))
                try await socket.expectClose(timeout: .seconds(2))
            }
        }
    }

    // MARK: close

    @Test("HTTP long-polling: a close packet sent alongside a poll answers the poll with noop and ends the session")
    func pollingClose() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            // As the suite sends them: the poll and the close at once, whichever the server sees first.
            let sid = try await server.openPollingSession()
            async let poll = server.get(server.pollingURL("&sid=\(sid)"))
            async let close = server.post(server.pollingURL("&sid=\(sid)"), "1")
            let (answer, closed) = try await (poll, close)
            #expect(closed.status == 200)
            #expect(answer.status == 200)
            #expect(answer.body == "6")
            #expect(try await server.get(server.pollingURL("&sid=\(sid)")).status == 400)
        }
    }

    @Test("HTTP long-polling: a poll that arrives just after the close packet gets the noop once, then 400")
    func pollingCloseBeforePoll() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            let sid = try await server.openPollingSession()
            #expect(try await server.post(server.pollingURL("&sid=\(sid)"), "1").status == 200)
            let late = try await server.get(server.pollingURL("&sid=\(sid)"))
            #expect(late.status == 200)
            #expect(late.body == "6")
            #expect(try await server.get(server.pollingURL("&sid=\(sid)")).status == 400)
        }
    }

    @Test("WebSocket: a close packet closes the socket")
    func webSocketClose() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            try await withTestWebSocket(server.webSocketURL()) { socket in
                _ = try await socket.next()
                socket.send("1")
                try await socket.expectClose(timeout: .seconds(1))
            }
        }
    }

    // MARK: upgrade

    @Test("upgrades from HTTP long-polling to WebSocket")
    func upgrade() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            let sid = try await server.openPollingSession()
            try await withTestWebSocket(server.webSocketURL("&sid=\(sid)")) { socket in
                socket.send("2probe")
                #expect(try await socket.next() == .text("3probe"))
                let poll = try await server.get(server.pollingURL("&sid=\(sid)"))
                #expect(poll.status == 200)
                #expect(poll.body == "6")
                socket.send("5")
                socket.send("4hello")
                #expect(try await socket.next() == .text("4hello"))
            }
        }
    }

    @Test(
        "after the upgrade, HTTP requests with the same sid are refused and a second WebSocket is accepted and closed ('ignores WebSocket connection with same sid after upgrade')"
    )
    func upgradeExclusive() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            let sid = try await server.openPollingSession()
            // Pings (every 300 ms here) are answered aside: the refusals below can take longer than that.
            try await withTestWebSocket(server.webSocketURL("&sid=\(sid)"), answerPings: true) { socket in
                socket.send("2probe")
                #expect(try await socket.next() == .text("3probe"))
                socket.send("5")
                try await eventually(timeout: .seconds(1), "polling refused after the upgrade") {
                    try await server.get(server.pollingURL("&sid=\(sid)")).status == 400
                }
                // Read on a raw socket, which tells a refused handshake (400) from an accepted one: the reference
                // suite's client fails on a refusal.
                let second = try RawWebSocket(
                    port: server.port, path: "/engine.io/?EIO=4&transport=websocket&sid=\(sid)")
                #expect(second.nextOpcode() == RawWebSocket.closeOpcode, "the second WebSocket is closed at once")
                second.close()
                #expect(try await server.get(server.pollingURL("&sid=nope")).status == 400)
                #expect(
                    throws: ProtocolMismatch.self, "a WebSocket for an unknown sid is refused, not accepted and closed"
                ) {
                    try RawWebSocket(port: server.port, path: "/engine.io/?EIO=4&transport=websocket&sid=nope")
                }
                socket.send("4hello")
                #expect(try await socket.next() == .text("4hello"))
            }
        }
    }

    // MARK: beyond the suite

    @Test("an oversized polling body gets 413 and an oversized WebSocket message closes; others keep being served")
    func oversize() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            let sid = try await server.openPollingSession()
            let big = "4" + String(repeating: "x", count: 1_000_001)
            #expect(try await server.post(server.pollingURL("&sid=\(sid)"), big).status == 413)
            try await withTestWebSocket(server.webSocketURL()) { socket in
                _ = try await socket.next()
                socket.send(big)
                try await socket.expectClose()
            }
            let other = try await server.openPollingSession()
            #expect(try await server.post(server.pollingURL("&sid=\(other)"), "4still here").body == "ok")
            #expect(try await server.get(server.pollingURL("&sid=\(other)")).body == "4still here")
        }
    }

    @Test("garbage in a polling body closes only that session")
    func garbageBody() async throws {
        try await ConformanceFixture.run(path: "/engine.io") { server in
            let bad = try await server.openPollingSession()
            let good = try await server.openPollingSession()
            #expect(
                try await server.post(server.pollingURL("&sid=\(bad)"), "4ok\u{1E}\u{00}\u{FF}garbage").status == 400)
            #expect(try await server.get(server.pollingURL("&sid=\(bad)")).status == 400)
            #expect(try await server.post(server.pollingURL("&sid=\(good)"), "4fine").body == "ok")
            #expect(try await server.get(server.pollingURL("&sid=\(good)")).body == "4fine")
        }
    }
}
