import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Engine.IO settings. The defaults are Socket.IO's production values.
package struct EngineConfiguration: Sendable {
    /// Where the server answers, e.g. `/socket.io` (requests go to `/socket.io/?EIO=4&transport=...`).
    package var path: String = "/socket.io"
    package var pingInterval: Duration = .seconds(25)
    package var pingTimeout: Duration = .seconds(20)
    /// The largest message or polling body accepted, in bytes.
    package var maxPayload: Int = 1_000_000
    /// How long a WebSocket may take between `2probe` and `5`.
    package var upgradeTimeout: Duration = .seconds(10)
    /// A session that the layer above has not claimed within this time is closed (Socket.IO's connectTimeout).
    package var connectTimeout: Duration?
    /// The most bytes that may wait for one peer (WebSocket output or the polling buffer); a peer that lets more
    /// pile up is disconnected.
    package var outboundBacklogLimit: Int = 1 << 20
    /// The most open sessions per client address (nil: no limit); a handshake over it is answered 429.
    package var maxSessionsPerAddress: Int?
    /// Which peers' `X-Forwarded-For` / `X-Real-IP` name the client (the gateway's address).
    package var trustedProxies = TrustedProxies.loopback

    package init() {}
}

/// The layer above Engine.IO: Socket.IO, or an echo for the conformance server.
package protocol EngineHandler: Sendable {
    /// A session opened; called before any of its messages is received.
    func opened(_ session: EngineSession)
    /// Runs for the lifetime of a new session; must return once the session has closed (see
    /// ``EngineSession/onClose(_:)``).
    func serve(_ session: EngineSession) async
    /// One message from the peer; messages of a session arrive in order, one at a time.
    /// - Throws: ``EngineProtocolError`` to close the session for a protocol violation.
    func receive(_ message: EngineMessage, from session: EngineSession) async throws(EngineProtocolError)
    /// The session closed.
    func closed(_ session: EngineSession, reason: EngineCloseReason) async
}

/// An Engine.IO v4 server: HTTP long-polling, WebSocket, the upgrade from one to the other, and the heartbeat.
/// Mount its HTTP routes with ``addRoutes(to:)`` and its WebSocket upgrade with ``RealtimeServerBuilder``; run
/// it in the service group (it supervises the sessions' heartbeats and closes them on shutdown).
package final class EngineServer: Service, Sendable {
    package let configuration: EngineConfiguration
    private let handler: any EngineHandler
    private let logger: Logger
    private struct Sessions {
        var byId: [String: EngineSession] = [:]
        /// Open sessions per client address (addresses with none are removed).
        var perAddress: [String: Int] = [:]
    }

    private let sessions = Mutex(Sessions())
    private let started: AsyncStream<EngineSession>
    private let starter: AsyncStream<EngineSession>.Continuation
    private let acceptingSessions = Atomic<Bool>(true)

    package init(configuration: EngineConfiguration, handler: some EngineHandler, logger: Logger) {
        self.configuration = configuration
        self.handler = handler
        self.logger = logger
        (started, starter) = AsyncStream.makeStream(of: EngineSession.self)
    }

    /// The number of open sessions.
    package var sessionCount: Int { sessions.withLock { $0.byId.count } }

    package func run() async throws {
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for await session in started {
                    group.addTask { await self.supervise(session) }
                }
            }
        } onGracefulShutdown: {
            self.shutDown()
        }
    }

    /// Stops accepting sessions and closes every open one.
    package func shutDown() {
        acceptingSessions.store(false, ordering: .releasing)
        starter.finish()
        for session in sessions.withLock({ Array($0.byId.values) }) {
            session.close(.serverShutdown)
        }
    }

    private func supervise(_ session: EngineSession) async {
        session.startHeartbeat(
            on: MultiThreadedEventLoopGroup.singleton.any(), interval: configuration.pingInterval,
            timeout: configuration.pingTimeout, connectTimeout: configuration.connectTimeout
        )
        await handler.serve(session)
        await session.waitUntilClosed()
        remove(session)
        await handler.closed(session, reason: session.closeReason ?? .serverClose)
    }

    /// Why a handshake opened no session.
    private enum Refusal: Error {
        case shuttingDown
        case tooManySessions
    }

    private func openSession(
        query: [String: String], headers: HTTPFields, peer: SocketAddress?, transport: EngineSession.Transport
    ) -> Result<EngineSession, Refusal> {
        guard acceptingSessions.load(ordering: .acquiring) else { return .failure(.shuttingDown) }
        let headerValues = Self.headerValues(headers)
        let address = configuration.trustedProxies.clientAddress(peer: peer, headers: headerValues)
        let session = EngineSession(
            id: Self.makeSessionId(), query: query, headers: headerValues, clientAddress: address,
            transport: transport, outboundLimit: configuration.outboundBacklogLimit
        )
        let admitted = sessions.withLock { sessions in
            if let address, let limit = configuration.maxSessionsPerAddress {
                guard sessions.perAddress[address, default: 0] < limit else { return false }
                sessions.perAddress[address, default: 0] += 1
            }
            sessions.byId[session.id] = session
            return true
        }
        guard admitted else {
            RealtimeMetrics.sessionsRefused.increment()
            return .failure(.tooManySessions)
        }
        handler.opened(session)
        guard case .enqueued = starter.yield(session) else {
            remove(session)
            return .failure(.shuttingDown)
        }
        return .success(session)
    }

    private func remove(_ session: EngineSession) {
        sessions.withLock { sessions in
            guard sessions.byId.removeValue(forKey: session.id) != nil, let address = session.clientAddress,
                configuration.maxSessionsPerAddress != nil
            else { return }
            sessions.perAddress[address, default: 1] -= 1
            if sessions.perAddress[address] == 0 { sessions.perAddress.removeValue(forKey: address) }
        }
    }

    private static func refusalResponse(_ refusal: Refusal) -> Response {
        switch refusal {
        case .shuttingDown: error(.serviceUnavailable, code: 3, "Server shutting down")
        case .tooManySessions: error(.tooManyRequests, code: 4, "Too many sessions from this address")
        }
    }

    private func openPacket(for session: EngineSession, upgrades: [String]) -> EnginePacket {
        let body = JSONValue.object(
            JSONObject([
                ("sid", .string(session.id)), ("upgrades", .array(upgrades.map { .string($0) })),
                ("pingInterval", JSONValue(Int(configuration.pingInterval.milliseconds))),
                ("pingTimeout", JSONValue(Int(configuration.pingTimeout.milliseconds))),
                ("maxPayload", JSONValue(configuration.maxPayload)),
            ])
        )
        return EnginePacket(.open, body.serialized)
    }

    /// Random 20-character session id, URL-safe.
    static func makeSessionId() -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        return String((0..<20).map { _ in alphabet[Int(generator.next(upperBound: UInt8(alphabet.count)))] })
    }

    // MARK: Incoming packets (both transports)

    /// Applies one packet from the peer. Returns false when the session is over.
    private func handle(_ packet: EnginePacket, from session: EngineSession) async -> Bool {
        switch packet.type {
        case .message:
            let message: EngineMessage =
                switch packet.payload {
                case .text(let text): .text(text)
                case .binary(let bytes): .binary(bytes)
                }
            do {
                try await handler.receive(message, from: session)
            } catch {
                logger.debug(
                    "closing session after a protocol error",
                    metadata: ["engine.sid": "\(session.id)", "error": "\(error)"])
                session.close(.protocolError)
                return false
            }
        case .pong:
            session.receivedPong()
        case .close:
            session.close(.clientClose, pollAnswer: EnginePacket(.noop))
            return false
        case .ping, .open:
            // Engine.IO v4 servers ping, clients do not (`2probe` is handled by the upgrade).
            session.close(.protocolError)
            return false
        case .upgrade, .noop:
            break
        }
        return !session.isClosed
    }

    // MARK: HTTP long-polling

    /// Adds `GET` and `POST` on the configured path.
    package func addRoutes<Context: RequestContext>(to router: Router<Context>) {
        let path = RouterPath(configuration.path)
        router.get(path) { request, context in await self.respond(to: request, context: context) }
        router.post(path) { request, context in await self.respond(to: request, context: context) }
        router.put(path) { request, context in await self.respond(to: request, context: context) }
    }

    /// The Engine.IO answer to an HTTP request on the path.
    package func respond(to request: Request, context: some RequestContext) async -> Response {
        let query = Self.query(of: request.uri.query)
        guard query["EIO"] == "4" else { return Self.error(.badRequest, code: 5, "Unsupported protocol version") }
        guard let transport = query["transport"], transport == "polling" || transport == "websocket" else {
            return Self.error(.badRequest, code: 0, "Transport unknown")
        }
        guard transport == "polling" else {
            // A WebSocket request that was not upgraded (bad sid, session already upgraded, too many sessions from
            // its address, or no Upgrade header).
            let peer = (context as? any RemoteAddressRequestContext)?.remoteAddress
            if query["sid"] == nil, atSessionLimit(peer: peer, headers: request.headers) {
                return Self.refusalResponse(.tooManySessions)
            }
            return Self.error(.badRequest, code: 3, "Bad request")
        }
        guard let sid = query["sid"] else {
            guard request.method == .get else { return Self.error(.badRequest, code: 2, "Bad handshake method") }
            let peer = (context as? any RemoteAddressRequestContext)?.remoteAddress
            switch openSession(query: query, headers: request.headers, peer: peer, transport: .polling) {
            case .success(let session):
                return Self.text(EnginePacket.encodePayload([openPacket(for: session, upgrades: ["websocket"])]))
            case .failure(let refusal):
                return Self.refusalResponse(refusal)
            }
        }
        guard let session = sessions.withLock({ $0.byId[sid] }) else {
            return Self.error(.badRequest, code: 1, "Session ID unknown")
        }
        switch request.method {
        case .get:
            return await poll(session, request: request)
        case .post:
            return await post(session, request: request, context: context)
        default:
            return Self.error(.badRequest, code: 3, "Bad request")
        }
    }

    private func poll(_ session: EngineSession, request: Request) async -> Response {
        if session.isWebSocket { return Self.error(.badRequest, code: 3, "Bad request") }
        let result: PollResult
        let answered = Atomic<Bool>(false)
        do {
            // A client that drops its waiting poll has gone: the session ends. (The handler also fires when the
            // connection closes after the answer; that is not a drop.)
            result = try await request.body.consumeWithInboundCloseHandler { _ in
                let result = await session.poll()
                answered.store(true, ordering: .releasing)
                return result
            } onInboundClosed: {
                if !answered.load(ordering: .acquiring) { session.close(.transportClose) }
            }
        } catch {
            session.close(.transportClose)
            return Self.error(.badRequest, code: 1, "Session ID unknown")
        }
        // The server closes the connection after a long poll; say so, so clients do not reuse it.
        var response: Response
        switch result {
        case .packets(let packets):
            response = Self.text(EnginePacket.encodePayload(packets))
        case .gone:
            response = Self.error(.badRequest, code: 1, "Session ID unknown")
        case .duplicate:
            response = Self.error(.badRequest, code: 3, "Bad request")
        }
        response.headers[.connection] = "close"
        return response
    }

    private func post(_ session: EngineSession, request: Request, context: some RequestContext) async -> Response {
        if session.isWebSocket { return Self.error(.badRequest, code: 3, "Bad request") }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: configuration.maxPayload)
        } catch {
            session.close(.transportError)
            return Self.error(.contentTooLarge, code: 3, "Payload too large")
        }
        let packets: [EnginePacket]
        do {
            packets = try EnginePacket.decodePayload(String(buffer: body))
        } catch {
            session.close(.protocolError)
            return Self.error(.badRequest, code: 3, "Bad request")
        }
        for packet in packets {
            guard await handle(packet, from: session) else { break }
        }
        return Response(
            status: .ok, headers: [.contentType: "text/html", .contentLength: "2"],
            body: .init(byteBuffer: ByteBuffer(string: "ok"))
        )
    }

    // MARK: WebSocket

    /// Whether the client behind `peer` (and the proxy headers) holds as many sessions as it may.
    private func atSessionLimit(peer: SocketAddress?, headers: HTTPFields) -> Bool {
        guard let limit = configuration.maxSessionsPerAddress,
            let address = configuration.trustedProxies.clientAddress(peer: peer, headers: Self.headerValues(headers))
        else { return false }
        return sessions.withLock { $0.perAddress[address, default: 0] >= limit }
    }

    /// Header values by lower-cased name (the last of repeated fields wins).
    static func headerValues(_ headers: HTTPFields) -> [String: String] {
        var values: [String: String] = [:]
        for field in headers { values[field.name.canonicalName] = field.value }
        return values
    }

    /// Whether a WebSocket upgrade request on `head` (arriving on `channel`) is for this server and acceptable;
    /// nil if not its path.
    package func shouldUpgrade(_ head: HTTPRequest, channel: any Channel) -> ShouldUpgradeResult<
        WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>
    >? {
        guard let target = head.path, Self.pathMatches(target, configuration.path) else { return nil }
        let query = Self.query(of: target.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init) ?? "")
        guard query["EIO"] == "4", query["transport"] == "websocket" else { return .dontUpgrade }
        if let sid = query["sid"] {
            guard let session = sessions.withLock({ $0.byId[sid] }), !session.isWebSocket,
                session.upgradeState == .none
            else {
                return .dontUpgrade
            }
            return .upgrade([:]) { inbound, outbound, _ in
                await self.upgrade(session, channel: channel, inbound: inbound, outbound: outbound)
            }
        }
        let headers = head.headerFields
        // A refused handshake is answered by `respond(to:context:)` with the protocol's error.
        if atSessionLimit(peer: channel.remoteAddress, headers: headers) { return .dontUpgrade }
        return .upgrade([:]) { inbound, outbound, _ in
            await self.serveWebSocket(
                query: query, headers: headers, channel: channel, inbound: inbound, outbound: outbound)
        }
    }

    /// A session that starts on WebSocket.
    private func serveWebSocket(
        query: [String: String], headers: HTTPFields, channel: any Channel, inbound: WebSocketInboundStream,
        outbound: WebSocketOutboundWriter
    ) async {
        let opened = openSession(
            query: query, headers: headers, peer: channel.remoteAddress, transport: .webSocket(channel))
        guard case .success(let session) = opened else {
            // Raced past the check in `shouldUpgrade`: the socket closes with a policy violation.
            try? await outbound.close(.policyViolation, reason: "Too many sessions from this address")
            return
        }
        session.send([openPacket(for: session, upgrades: [])])
        await pump(
            session, inbound: inbound.messages(maxSize: configuration.maxPayload).makeAsyncIterator(),
            outbound: outbound)
    }

    /// The upgrade of a polling session: `2probe`/`3probe`, then `5`, within the upgrade timeout.
    private func upgrade(
        _ session: EngineSession, channel: any Channel, inbound: WebSocketInboundStream,
        outbound: WebSocketOutboundWriter
    ) async {
        var messages = inbound.messages(maxSize: configuration.maxPayload).makeAsyncIterator()
        let completed = await withTaskGroup(of: Void.self) { group in
            group.addTask { [configuration] in
                // An upgrade that stalls is abandoned: closing the socket ends the reads below.
                guard (try? await Task.sleep(for: configuration.upgradeTimeout)) != nil else { return }
                try? await outbound.close(.policyViolation, reason: "upgrade timeout")
            }
            defer { group.cancelAll() }
            do {
                guard case .text("2probe") = try await messages.next(), session.beginUpgrade() else { return false }
                try await outbound.write(.text("3probe"))
                guard case .text("5") = try await messages.next() else { return false }
                session.completeUpgrade(channel: channel)
                return true
            } catch {
                return false
            }
        }
        guard completed else {
            session.cancelUpgrade()
            return
        }
        await pump(session, inbound: messages, outbound: outbound)
    }

    /// Writes the session's packets (in a child task) and reads the peer's until either side ends the session.
    private func pump(
        _ session: EngineSession, inbound: WebSocketInboundMessageStream.AsyncIterator,
        outbound: WebSocketOutboundWriter
    ) async {
        var inbound = inbound
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                var written = 0
                while let batch = await session.nextWebSocketBatch(written: written) {
                    written = 0
                    for packet in batch {
                        do {
                            if let text = packet.webSocketText {
                                try await outbound.write(.text(text))
                            } else if case .binary(let bytes) = packet.payload {
                                try await outbound.write(.binary(ByteBuffer(bytes: bytes)))
                            }
                        } catch {
                            session.close(.transportError)
                        }
                        written += packet.byteCount
                    }
                }
                // The session closed and its last packets are written: end the socket, which ends the reads.
                try? await outbound.close(.normalClosure, reason: nil)
            }
            do {
                while let message = try await inbound.next() {
                    let packet: EnginePacket
                    switch message {
                    case .text(let text):
                        guard let decoded = try? EnginePacket.decode(text: text[...], allowBase64: false) else {
                            session.close(.protocolError)
                            return
                        }
                        packet = decoded
                    case .binary(let buffer):
                        packet = .binary(Array(buffer: buffer))
                    }
                    guard await handle(packet, from: session) else { return }
                }
                session.close(.transportClose)
            } catch {
                session.close(.transportError)
            }
        }
    }

    // MARK: Helpers

    /// The decoded query parameters of a request target's query; `=`, `a=` and `=b` are kept, never a crash.
    package static func query(of text: String?) -> [String: String] {
        var values: [String: String] = [:]
        for pair in (text ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            let value =
                parts.count > 1
                ? (String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "") : ""
            values[key] = value
        }
        return values
    }

    static func pathMatches(_ target: String, _ path: String) -> Bool {
        let requestPath = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
        let trimmed = path.hasSuffix("/") ? String(path.dropLast()) : path
        return requestPath == trimmed || requestPath == trimmed + "/"
    }

    static func text(_ body: String) -> Response {
        var buffer = ByteBuffer()
        buffer.writeString(body)
        return Response(
            status: .ok,
            headers: [
                .contentType: "text/plain; charset=UTF-8", .cacheControl: "no-store",
                .contentLength: String(buffer.readableBytes),
            ],
            body: .init(byteBuffer: buffer)
        )
    }

    /// Engine.IO's error answer: `{"code":N,"message":"..."}`.
    static func error(_ status: HTTPResponse.Status, code: Int, _ message: String) -> Response {
        let body = JSONValue.object(JSONObject([("code", JSONValue(code)), ("message", .string(message))])).serialized
        return Response(
            status: status, headers: [.contentType: "application/json", .contentLength: String(body.utf8.count)],
            body: .init(byteBuffer: ByteBuffer(string: body))
        )
    }
}

extension Duration {
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
