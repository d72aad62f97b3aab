import AsyncHTTPClient
import Contracts
import Foundation
import Hummingbird
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Realtime
import RealtimePlatform
import RealtimeTesting
import ServiceKit
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Clients that do not read, send faster than they are handled, flood events, open sessions without end or keep
/// a socket past its token: each is bounded or disconnected, never buffered for without limit.
@Suite("Realtime backpressure and hostile clients", .timeLimit(.minutes(2)))
struct HostileClientTests {
    struct Flood: Codable, Sendable {
        var count: Int
        var size: Int
        /// Milliseconds between emits (a client that reads keeps up).
        var pauseMs: Int?
    }
    struct Done: Codable, Sendable { var sent: Int }
    struct Filler: Codable, Sendable { var index: Int; var text: String }
    struct Who: Codable, Sendable { var userId: String }
    struct Empty: Codable, Sendable {}

    /// The test server: `/flood` (`flood` emits `count` events of `size` bytes; `positions` emits keyed
    /// `location`s), `/slow` (`wait` blocks until the gate opens), `/open` (no rate limit of its own) and
    /// `/secure` (a token required).
    final class Server: Sendable {
        let realtime: RealtimeServer
        let gate = AsyncQueue<Void>()
        let disconnects = AsyncQueue<String>()
        let handled = AsyncQueue<String>()

        init(
            engine: EngineConfiguration = EngineConfiguration(),
            socketIO: SocketIOConfiguration = SocketIOConfiguration(),
            verifier: AccessTokenVerifier? = nil
        ) {
            realtime = RealtimeServer(
                configuration: engine, socketIO: socketIO, logger: TestInfrastructure.logger("hostile-clients"))
            let flood = realtime.namespace("/flood")
            flood.rateLimit = SocketIORateLimit(eventsPerSecond: 1000, burst: 1000)
            flood.on("flood", Flood.self) { socket, request in
                let text = String(repeating: "x", count: request.size)
                for index in 0..<request.count {
                    socket.emit("filler", Filler(index: index, text: text))
                    if let pause = request.pauseMs { try await Task.sleep(for: .milliseconds(pause)) }
                }
                return Done(sent: request.count)
            }
            flood.on("positions", Flood.self) { [handled] socket, request in
                for index in 0..<request.count {
                    try await flood.emit(
                        "location", Filler(index: index, text: "job-1"), toRoom: socket.id, latestKey: "job-1")
                    try await flood.emit(
                        "location", Filler(index: index, text: "job-2"), toRoom: socket.id, latestKey: "job-2")
                }
                socket.emit("status", Filler(index: request.count, text: "unkeyed"))
                handled.push("positions")
                return Done(sent: request.count)
            }
            flood.onDisconnect { [disconnects] _, reason in disconnects.push(reason.rawValue) }
            let slow = realtime.namespace("/slow")
            slow.rateLimit = SocketIORateLimit(eventsPerSecond: 100_000, burst: 100_000)
            slow.on("wait") { [gate] _, _, _ in _ = try? await gate.next(timeout: .seconds(20)) }
            slow.onDisconnect { [disconnects] _, reason in disconnects.push(reason.rawValue) }
            realtime.namespace("/open").on("ping", Empty.self) { _, _ in Empty() }
            if let verifier {
                let secure = realtime.namespace("/secure")
                secure.requireToken(verifier)
                secure.on("whoami", Empty.self) { socket, _ in Who(userId: socket.identity?.userId ?? "") }
            }
        }

        /// Runs the server (with the services' request context, which knows the peer's address) during `body`.
        func run(_ body: @Sendable (Int) async throws -> Void) async throws {
            let port = TestPorts.allocate()
            let router = Router(context: ServiceRequestContext.self)
            realtime.addRoutes(to: router)
            let app = Application(
                router: router, server: RealtimeServerBuilder.http1WithWebSockets([realtime.engine]),
                configuration: .init(address: .hostname("127.0.0.1", port: port)),
                logger: TestInfrastructure.logger("hostile-clients")
            )
            try await withRunningApplication(app, port: port, services: [realtime]) {
                defer { for _ in 0..<100 { gate.push(()) } }
                try await body(port)
            }
        }
    }

    static func webSocketURL(_ port: Int) -> String { "ws://127.0.0.1:\(port)/socket.io/?EIO=4&transport=websocket" }
    static func pollingURL(_ port: Int, _ extra: String = "") -> String {
        "http://127.0.0.1:\(port)/socket.io/?EIO=4&transport=polling\(extra)"
    }

    static func http(
        _ method: HTTPMethod, _ url: String, body: String? = nil, headers: [(String, String)] = []
    ) async throws -> ConformanceFixture.HTTPAnswer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body {
            request.body = .bytes(ByteBuffer(string: body))
            request.headers.add(name: "Content-Type", value: "text/plain;charset=UTF-8")
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 16 << 20)
        return .init(status: Int(response.status.code), body: String(buffer: bytes), contentType: nil)
    }

    /// Opens a polling session (optionally through a proxy's headers) and returns its sid, or the refusal.
    static func openPolling(_ port: Int, headers: [(String, String)] = []) async throws -> Result<
        String, RefusedHandshake
    > {
        let answer = try await http(.GET, pollingURL(port), headers: headers)
        guard answer.status == 200 else { return .failure(RefusedHandshake(status: answer.status, body: answer.body)) }
        let open = try JSONValue.parse(String(answer.body.dropFirst()))
        guard let sid = open["sid"]?.stringValue else { throw ProtocolMismatch("no sid in \(answer.body)") }
        return .success(sid)
    }

    struct RefusedHandshake: Error, Equatable {
        var status: Int
        var body: String
    }

    /// The packets of one polling GET.
    static func poll(_ port: Int, sid: String) async throws -> [String] {
        try await http(.GET, pollingURL(port, "&sid=\(sid)")).pollingPackets()
    }

    // MARK: Connections that send nothing

    @Test("a connection that never sends a request does not hold up a graceful shutdown")
    func silentConnectionAtShutdown() async throws {
        let port = TestPorts.allocate()
        let (app, realtime) = ConformanceServer.makeApplication(
            port: port, logger: TestInfrastructure.logger("hostile-clients"))
        let silent = Locked<Int32>(-1)
        // Should the shutdown wait for it after all, the connection is closed later, so the test fails with
        // ShutdownOverran rather than hang.
        let safety = Task {
            try await Task.sleep(for: .seconds(20))
            silent.withLock { if $0 >= 0 { _ = shutdown($0, Int32(SHUT_RDWR)) } }
        }
        defer { safety.cancel() }
        let began = ContinuousClock.now
        try await withRunningServices([app] + realtime, port: port, shutdownLimit: .seconds(10)) {
            let descriptor = try RawWebSocket.connectedSocket(port: port)
            silent.withLock { $0 = descriptor }
            // A request on another connection: the server is serving, and has had time to accept the silent one.
            #expect(try await Self.http(.GET, Self.pollingURL(port)).status == 200)
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(ContinuousClock.now - began < .seconds(10))
        // The server closed it: a read finds the end of the stream.
        var byte: UInt8 = 0
        #expect(silent.withLock { recv($0, &byte, 1, 0) } == 0)
        silent.withLock { _ = close($0) }
    }

    @Test("a connection that sends no request within the first-request timeout is closed")
    func silentConnectionTimesOut() async throws {
        let port = TestPorts.allocate()
        let (app, realtime) = ConformanceServer.makeApplication(
            port: port, firstRequestTimeout: .milliseconds(300), logger: TestInfrastructure.logger("hostile-clients"))
        try await withRunningServices([app] + realtime, port: port) {
            let silent = try RawWebSocket.connectedSocket(port: port)
            defer { Glibc.close(silent) }
            // The read waits up to 5 s (the socket's receive timeout); the server closes it after 300 ms.
            var byte: UInt8 = 0
            #expect(recv(silent, &byte, 1, 0) == 0)
            // One that asks in time is served.
            #expect(try await Self.http(.GET, Self.pollingURL(port)).status == 200)
        }
    }

    @Test("an HTTP connection with no request in flight for the idle timeout is closed; a long poll is not cut")
    func idleConnectionTimesOut() async throws {
        let port = TestPorts.allocate()
        let (app, realtime) = ConformanceServer.makeApplication(
            port: port, pingInterval: .milliseconds(1000), pingTimeout: .milliseconds(1000),
            connectTimeout: .seconds(5), idleTimeout: .milliseconds(300),
            logger: TestInfrastructure.logger("hostile-clients"))
        try await withRunningServices([app] + realtime, port: port) {
            let connection = try RawWebSocket.connectedSocket(port: port)
            defer { Glibc.close(connection) }
            let target = "/socket.io/?EIO=4&transport=polling"
            let open = try Self.exchange(connection, "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let sid = try #require(try JSONValue.parse(String(open.dropFirst()))["sid"]?.stringValue)
            // The long poll waits a second for the ping, three idle timeouts, on the same connection.
            let poll = try Self.exchange(connection, "GET \(target)&sid=\(sid) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(poll == "2")
            // Then nothing is in flight, and the server closes the connection (the read waits up to 5 s).
            var byte: UInt8 = 0
            #expect(recv(connection, &byte, 1, 0) == 0)
        }
    }

    /// Sends `request` on a raw connection and returns the body of the answer (which must carry a Content-Length).
    static func exchange(_ descriptor: Int32, _ request: String) throws -> String {
        guard send(descriptor, request, request.utf8.count, 0) == request.utf8.count else {
            throw ProtocolMismatch("send() failed")
        }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let text = String(decoding: received, as: UTF8.self)
            if let headEnd = text.range(of: "\r\n\r\n"),
                let lengthLine = text[..<headEnd.lowerBound].split(separator: "\r\n").first(where: {
                    $0.lowercased().hasPrefix("content-length:")
                }),
                let length = Int(lengthLine.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)),
                text.utf8.distance(from: headEnd.upperBound.samePosition(in: text.utf8)!, to: text.utf8.endIndex)
                    >= length
            {
                return String(text[headEnd.upperBound...])
            }
            let count = recv(descriptor, &chunk, chunk.count, 0)
            guard count > 0 else { throw ProtocolMismatch("the connection ended: \(text)") }
            received += chunk[0..<count]
        }
    }

    // MARK: Outbound backlog

    @Test("a polling client that never polls is disconnected once its backlog passes the limit in bytes")
    func pollingBacklogLimit() async throws {
        var engine = EngineConfiguration()
        engine.outboundBacklogLimit = 64 * 1024
        let server = Server(engine: engine)
        try await server.run { port in
            let sid = try await Self.openPolling(port).get()
            #expect(try await Self.http(.POST, Self.pollingURL(port, "&sid=\(sid)"), body: "40/flood,").status == 200)
            #expect(try await Self.poll(port, sid: sid).first?.hasPrefix("40/flood,") == true)
            // 40 KB waits: under the limit, the session stays and the poll gets all of it.
            let under = #"42/flood,1["flood",{"count":40,"size":1000}]"#
            #expect(try await Self.http(.POST, Self.pollingURL(port, "&sid=\(sid)"), body: under).status == 200)
            var received: [String] = []
            while !received.contains(where: { $0.hasPrefix("43/flood,1") }) {
                received += try await Self.poll(port, sid: sid)
            }
            #expect(received.filter { $0.hasPrefix(#"42/flood,["filler""#) }.count == 40)
            // 200 KB: over the limit with nobody polling.
            let over = #"42/flood,2["flood",{"count":200,"size":1000}]"#
            #expect(try await Self.http(.POST, Self.pollingURL(port, "&sid=\(sid)"), body: over).status == 200)
            #expect(try await server.disconnects.next() == "transport error")
            try await eventually("the session is gone") { server.realtime.engine.sessionCount == 0 }
            #expect(try await Self.http(.GET, Self.pollingURL(port, "&sid=\(sid)")).status == 400)
        }
    }

    @Test("a WebSocket client that stops reading is disconnected; one that reads gets every event")
    func webSocketBacklogLimit() async throws {
        var engine = EngineConfiguration()
        engine.outboundBacklogLimit = 512 * 1024
        let server = Server(engine: engine)
        try await server.run { port in
            let flood = #"42/flood,1["flood",{"count":600,"size":16384,"pauseMs":2}]"#
            try await withTestWebSocket(Self.webSocketURL(port), answerPings: true) { socket in
                _ = try await socket.next()
                socket.send("40/flood,")
                _ = try await socket.next()
                socket.send(flood)
                var fillers = 0
                while true {
                    let frame = try await socket.next(timeout: .seconds(10))
                    guard let text = frame.textContent else { throw ProtocolMismatch("closed after \(fillers)") }
                    if text.hasPrefix("43/flood,1") { break }
                    fillers += 1
                }
                #expect(fillers == 600)
            }
            #expect(try await server.disconnects.next() == "transport close")
            // The same 10 MB to a client whose receive buffer is full: the server stops buffering at 512 KB.
            let silent = try RawWebSocket(port: port, path: "/socket.io/?EIO=4&transport=websocket")
            defer { silent.close() }
            silent.send("40/flood,")
            silent.send(flood)
            #expect(try await server.disconnects.next(timeout: .seconds(20)) == "transport error")
            try await eventually("the session is gone") { server.realtime.engine.sessionCount == 0 }
        }
    }

    @Test("only the latest pending emit per key waits for a slow client")
    func latestPerKey() async throws {
        let server = Server()
        try await server.run { port in
            let sid = try await Self.openPolling(port).get()
            _ = try await Self.http(.POST, Self.pollingURL(port, "&sid=\(sid)"), body: "40/flood,")
            _ = try await Self.poll(port, sid: sid)
            let positions = #"42/flood,1["positions",{"count":50,"size":0}]"#
            _ = try await Self.http(.POST, Self.pollingURL(port, "&sid=\(sid)"), body: positions)
            // Nobody polls while they are emitted: they wait, as for a slow client.
            #expect(try await server.handled.next() == "positions")
            var received: [String] = []
            while !received.contains(where: { $0.hasPrefix("43/flood,1") }) {
                received += try await Self.poll(port, sid: sid)
            }
            let locations = received.filter { $0.hasPrefix(#"42/flood,["location""#) }
            #expect(
                locations == [
                    #"42/flood,["location",{"index":49,"text":"job-1"}]"#,
                    #"42/flood,["location",{"index":49,"text":"job-2"}]"#,
                ])
            #expect(received.contains(#"42/flood,["status",{"index":50,"text":"unkeyed"}]"#))
        }
    }

    // MARK: Inbound queue

    @Test("a client that sends faster than its events are handled is disconnected at the inbound limit")
    func inboundBacklogLimit() async throws {
        var socketIO = SocketIOConfiguration()
        socketIO.inboundBacklogLimit = 8 * 1024
        let server = Server(socketIO: socketIO)
        try await server.run { port in
            try await withTestWebSocket(Self.webSocketURL(port), answerPings: true) { socket in
                _ = try await socket.next()
                socket.send("40/slow,")
                _ = try await socket.next()
                let payload = String(repeating: "y", count: 200)
                // The first blocks its handler; 39 more fit in 8 KB, the next 60 do not.
                for _ in 0..<100 { socket.send(#"42/slow,["wait","\#(payload)"]"#) }
                try await socket.expectClose(timeout: .seconds(5))
            }
            server.gate.push(())
            #expect(try await server.disconnects.next() == "transport error")
        }
    }

    // MARK: Recovery

    @Test("a recovery naming a session this instance does not hold is answered at once, however far ahead its offset")
    func unknownSessionIsNotWaitedFor() async throws {
        var socketIO = SocketIOConfiguration()
        socketIO.recovery = SocketIORecoverySettings()
        let server = Server(socketIO: socketIO)
        try await server.run { port in
            try await withTestWebSocket(Self.webSocketURL(port), answerPings: true) { socket in
                _ = try await socket.next()
                socket.send(#"40/open,{"pid":"forged-pid","offset":"9223372036854775806"}"#)
                let answer = try await socket.nextSkippingPings(timeout: .seconds(10)).textContent ?? ""
                #expect(answer.hasPrefix(#"40/open,{"sid":"#), "\(answer)")
                #expect(!answer.contains("forged-pid"), "a session that never existed was restored: \(answer)")
            }
        }
    }

    // MARK: Rate limit

    @Test("every namespace gets the server's default rate limit; over it events are answered RATE_LIMITED")
    func defaultRateLimit() async throws {
        var socketIO = SocketIOConfiguration()
        socketIO.rateLimit = SocketIORateLimit(eventsPerSecond: 0.5, burst: 2)
        let server = Server(socketIO: socketIO)
        try await server.run { port in
            try await withTestWebSocket(Self.webSocketURL(port), answerPings: true) { socket in
                _ = try await socket.next()
                socket.send("40/open,")
                _ = try await socket.next()
                for index in 1...3 { socket.send(#"42/open,\#(index)["ping",{}]"#) }
                #expect(try await socket.next() == .text("43/open,1[{}]"))
                #expect(try await socket.next() == .text("43/open,2[{}]"))
                let third = try await socket.next().textContent ?? ""
                #expect(third.hasPrefix(#"43/open,3[{"error":{"code":"RATE_LIMITED""#), "\(third)")
            }
        }
    }

    // MARK: Sessions per address

    @Test("sessions per client address are capped; a trusted proxy's X-Forwarded-For names the client")
    func sessionsPerAddress() async throws {
        var engine = EngineConfiguration()
        engine.maxSessionsPerAddress = 2
        let server = Server(engine: engine)
        try await server.run { port in
            let first = try await Self.openPolling(port).get()
            _ = try await Self.openPolling(port).get()
            guard case .failure(let refused) = try await Self.openPolling(port) else {
                Issue.record("a third session was opened")
                return
            }
            #expect(refused.status == 429)
            let body = try JSONValue.parse(refused.body)
            #expect(body["code"] == JSONValue(4))
            #expect(body["message"]?.stringValue == "Too many sessions from this address")
            // A WebSocket handshake from the same address is refused the same way.
            let webSocket = try await Self.http(
                .GET, Self.webSocketURL(port).replacingOccurrences(of: "ws:", with: "http:"))
            #expect(webSocket.status == 429)
            try await withTestWebSocket(Self.webSocketURL(port)) { socket in
                let frame = try await socket.next()
                #expect(frame == .closed)
            }
            // Behind the gateway (127.0.0.1 is trusted by default) each client counts on its own; the left-most
            // entries of X-Forwarded-For are the client's to invent and do not count.
            let proxied = [("X-Forwarded-For", "10.9.9.9, 203.0.113.7")]
            _ = try await Self.openPolling(port, headers: proxied).get()
            _ = try await Self.openPolling(port, headers: [("X-Forwarded-For", "10.9.9.8, 203.0.113.7")]).get()
            #expect(try await Self.openPolling(port, headers: proxied).isFailure)
            #expect(try await Self.openPolling(port, headers: [("X-Real-IP", "198.51.100.1")]).isSuccess)
            // A closed session frees its place.
            _ = try await Self.http(.POST, Self.pollingURL(port, "&sid=\(first)"), body: "1")
            try await eventually("a place is free") { try await Self.openPolling(port).isSuccess }
        }
    }

    @Test("an untrusted peer's X-Forwarded-For is ignored")
    func untrustedForwardedFor() async throws {
        var engine = EngineConfiguration()
        engine.maxSessionsPerAddress = 1
        engine.trustedProxies = try TrustedProxies(["10.0.0.0/8"])
        let server = Server(engine: engine)
        try await server.run { port in
            _ = try await Self.openPolling(port, headers: [("X-Forwarded-For", "203.0.113.1")]).get()
            #expect(try await Self.openPolling(port, headers: [("X-Forwarded-For", "203.0.113.2")]).isFailure)
        }
    }

    @Test("trusted proxies: addresses and IPv4 ranges; the right-most untrusted hop is the client")
    func trustedProxies() throws {
        let proxies = try TrustedProxies(["127.0.0.1", "::1", "172.16.0.0/12"])
        let gateway = try SocketAddress(ipAddress: "172.18.0.5", port: 40000)
        let client = try SocketAddress(ipAddress: "198.51.100.4", port: 40000)
        #expect(proxies.clientAddress(peer: client, headers: ["x-forwarded-for": "1.2.3.4"]) == "198.51.100.4")
        #expect(
            proxies.clientAddress(peer: gateway, headers: ["x-forwarded-for": "1.2.3.4, 203.0.113.9, 172.18.0.7"])
                == "203.0.113.9")
        #expect(proxies.clientAddress(peer: gateway, headers: ["x-real-ip": "203.0.113.10"]) == "203.0.113.10")
        #expect(proxies.clientAddress(peer: gateway, headers: [:]) == "172.18.0.5")
        #expect(proxies.clientAddress(peer: nil, headers: ["x-forwarded-for": "1.2.3.4"]) == nil)
        #expect(throws: TrustedProxies.InvalidEntry(entry: "10.0.0.0/33")) { try TrustedProxies(["10.0.0.0/33"]) }
        #expect(throws: TrustedProxies.InvalidEntry(entry: "gateway")) { try TrustedProxies(["gateway"]) }
    }

    @Test("the realtime settings come from the environment, with sane defaults")
    func settings() throws {
        let defaults = try RealtimeSettings(environment: ServiceEnvironment([:]))
        #expect(defaults.connectTimeout == .seconds(20))
        #expect(defaults.outboundBacklogLimit == 1 << 20)
        #expect(defaults.inboundBacklogLimit == 1 << 20)
        #expect(defaults.rateLimit.eventsPerSecond == 20 && defaults.rateLimit.burst == 50)
        #expect(defaults.maxSessionsPerAddress == 200)
        #expect(defaults.trustedProxies == TrustedProxies.loopback)
        let custom = try RealtimeSettings(
            environment: ServiceEnvironment([
                "SOCKETIO_CONNECT_TIMEOUT_MS": "5000", "SOCKETIO_OUTBOUND_BACKLOG_BYTES": "65536",
                "SOCKETIO_INBOUND_BACKLOG_BYTES": "4096", "SOCKETIO_RATE_LIMIT_PER_SECOND": "2",
                "SOCKETIO_RATE_LIMIT_BURST": "3", "SOCKETIO_MAX_SESSIONS_PER_ADDRESS": "0",
                "SOCKETIO_TRUSTED_PROXIES": "10.0.0.0/8, 127.0.0.1",
            ]))
        #expect(custom.connectTimeout == .seconds(5))
        #expect(custom.outboundBacklogLimit == 65536)
        #expect(custom.inboundBacklogLimit == 4096)
        #expect(custom.rateLimit.eventsPerSecond == 2 && custom.rateLimit.burst == 3)
        #expect(custom.maxSessionsPerAddress == nil)
        #expect(custom.trustedProxies == (try TrustedProxies(["10.0.0.0/8", "127.0.0.1"])))
        #expect(throws: ConfigurationError.self) {
            try RealtimeSettings(environment: ServiceEnvironment(["SOCKETIO_TRUSTED_PROXIES": "gateway"]))
        }
    }

    // MARK: Token expiry

    @Test("a socket is disconnected at its token's expiry with token_expired; refresh_token moves the deadline")
    func tokenExpiry() async throws {
        let clock = NIOAsyncTestingEventLoop()
        var socketIO = SocketIOConfiguration()
        socketIO.timers = clock
        // No clock skew allowed, so the deadlines below are the tokens' `exp` (with it, each is `exp` + leeway).
        let server = Server(socketIO: socketIO, verifier: try await JWTKeyCollectionForTests.verifier(leeway: .zero))
        try await server.run { port in
            let token = try await TestAuth.issuer.token(userId: "rider-1", role: .rider, expiresIn: .seconds(60))
            try await withTestWebSocket(Self.webSocketURL(port), answerPings: true) { socket in
                _ = try await socket.next()
                socket.send(#"40/secure,{"token":"\#(token)"}"#)
                #expect(try await socket.next().textContent?.hasPrefix("40/secure,") == true)
                // Refusals: another user's token, a token that is not valid.
                let other = try await TestAuth.issuer.token(userId: "rider-2", role: .rider)
                socket.send(#"42/secure,1["refresh_token",{"token":"\#(other)"}]"#)
                #expect(
                    try await socket.next().textContent?.hasPrefix(#"43/secure,1[{"error":{"code":"FORBIDDEN""#) == true
                )
                socket.send(#"42/secure,2["refresh_token",{"token":"not-a-jwt"}]"#)
                #expect(
                    try await socket.next().textContent?.hasPrefix(#"43/secure,2[{"error":{"code":"INVALID_TOKEN""#)
                        == true)
                let fresh = try await TestAuth.issuer.token(userId: "rider-1", role: .rider, expiresIn: .seconds(120))
                socket.send(#"42/secure,3["refresh_token",{"token":"\#(fresh)"}]"#)
                #expect(try await socket.next().textContent?.hasPrefix(#"43/secure,3[{"expiresAt":""#) == true)
                // Past the first token's expiry: still connected.
                await clock.advanceTime(by: .seconds(61))
                socket.send(#"42/secure,4["whoami",{}]"#)
                #expect(try await socket.next() == .text(#"43/secure,4[{"userId":"rider-1"}]"#))
                // Past the refreshed one: token_expired, then DISCONNECT.
                await clock.advanceTime(by: .seconds(60))
                let expired = try await socket.next().textContent ?? ""
                #expect(expired.hasPrefix(#"42/secure,["token_expired",{"code":"TOKEN_EXPIRED""#), "\(expired)")
                #expect(try await socket.next() == .text("41/secure,"))
            }
        }
        await clock.shutdownGracefully()
    }

    @Test("a socket whose token is not refreshed is disconnected at its expiry")
    func tokenExpiryWithoutRefresh() async throws {
        let clock = NIOAsyncTestingEventLoop()
        var socketIO = SocketIOConfiguration()
        socketIO.timers = clock
        let server = Server(socketIO: socketIO, verifier: try await JWTKeyCollectionForTests.verifier(leeway: .zero))
        try await server.run { port in
            let token = try await TestAuth.issuer.token(userId: "customer-1", role: .customer, expiresIn: .seconds(600))
            try await withTestWebSocket(Self.webSocketURL(port), answerPings: true) { socket in
                _ = try await socket.next()
                socket.send(#"40/secure,{"token":"\#(token)"}"#)
                #expect(try await socket.next().textContent?.hasPrefix("40/secure,") == true)
                await clock.advanceTime(by: .seconds(590))
                socket.send(#"42/secure,1["whoami",{}]"#)
                #expect(try await socket.next() == .text(#"43/secure,1[{"userId":"customer-1"}]"#))
                await clock.advanceTime(by: .seconds(11))
                #expect(try await socket.next().textContent?.hasPrefix(#"42/secure,["token_expired""#) == true)
                #expect(try await socket.next() == .text("41/secure,"))
            }
        }
        await clock.shutdownGracefully()
    }
}

extension Result {
    var isSuccess: Bool { if case .success = self { true } else { false } }
    var isFailure: Bool { !isSuccess }
}

/// A WebSocket client on a bare socket: the handshake must be answered 101 (anything else throws), then it reads
/// only when asked, with a small receive buffer, so what the server sends piles up (a client on a stalled network,
/// or a hostile one).
final class RawWebSocket: Sendable {
    static let closeOpcode: UInt8 = 0x8

    let descriptor: Int32

    init(port: Int, path: String) throws {
        descriptor = try Self.connectedSocket(port: port)
        write(
            Array(
                ("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8))
        // Reads the answer's head byte by byte, and nothing after it.
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !head.ends(with: Array("\r\n\r\n".utf8)) {
            guard recv(descriptor, &byte, 1, 0) == 1 else { throw ProtocolMismatch("no upgrade answer") }
            head.append(byte)
        }
        guard String(decoding: head, as: UTF8.self).hasPrefix("HTTP/1.1 101") else {
            throw ProtocolMismatch("not upgraded: \(String(decoding: head, as: UTF8.self))")
        }
    }

    /// A TCP connection to 127.0.0.1:`port` that has sent nothing, with a small receive buffer and reads that give
    /// up after 5 s.
    static func connectedSocket(port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw ProtocolMismatch("socket() failed") }
        var bufferSize: Int32 = 4096
        setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &bufferSize, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            Glibc.close(descriptor)
            throw ProtocolMismatch("connect() failed")
        }
        return descriptor
    }

    /// The opcode of the next frame the server sends (its payload skipped), or nil if the connection ended or
    /// nothing came within 5 s.
    func nextOpcode() -> UInt8? { nextFrame()?.opcode }

    /// The next frame the server sends (unmasked, as a server sends), or nil if the connection ended or nothing came
    /// within 5 s.
    func nextFrame() -> (opcode: UInt8, fin: Bool, payload: [UInt8])? {
        guard let header = read(2) else { return nil }
        var length = Int(header[1] & 0x7F)
        if length == 126, let extended = read(2) {
            length = Int(extended[0]) << 8 | Int(extended[1])
        } else if length == 127, let extended = read(8) {
            length = extended.reduce(0) { $0 << 8 | Int($1) }
        }
        guard let payload = length == 0 ? [] : read(length) else { return nil }
        return (header[0] & 0x0F, header[0] & 0x80 != 0, payload)
    }

    private func read(_ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let received = bytes[filled...].withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard received > 0 else { return nil }
            filled += received
        }
        return bytes
    }

    /// Sends one masked text frame.
    func send(_ text: String) { send(opcode: 0x1, payload: Array(text.utf8)) }

    /// Sends one masked frame, as a client does.
    func send(opcode: UInt8, fin: Bool = true, payload: [UInt8]) {
        var frame: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        frame += Self.maskedLength(payload.count)
        frame += payload.enumerated().map { $0.element ^ Self.mask[$0.offset % 4] }
        write(frame)
    }

    /// Sends only the head of a frame that announces `length` bytes of payload, and none of them.
    func sendHead(opcode: UInt8, length: Int) {
        write([0x80 | opcode] + Self.maskedLength(length))
    }

    static let mask: [UInt8] = [1, 2, 3, 4]

    /// The length bytes of a masked client frame (7, 16 or 64 bits), then the mask.
    static func maskedLength(_ length: Int) -> [UInt8] {
        let bytes: [UInt8] =
            switch length {
            case ..<126: [0x80 | UInt8(length)]
            case ...0xFFFF: [0x80 | 126, UInt8(length >> 8), UInt8(length & 0xFF)]
            default: [0x80 | 127] + (0..<8).reversed().map { UInt8((length >> ($0 * 8)) & 0xFF) }
            }
        return bytes + mask
    }

    private func write(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { return }
            offset += sent
        }
    }

    func close() { _ = Glibc.close(descriptor) }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}
