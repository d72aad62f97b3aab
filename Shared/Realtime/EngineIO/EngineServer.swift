import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Engine.IO settings. The defaults are Socket.IO's production values.
public struct EngineConfiguration: Sendable {
    /// Where the server answers, e.g. `/socket.io` (requests go to `/socket.io/?EIO=4&transport=...`).
    public var path: String = "/socket.io"
    /// How long after a session opens, or after the last pong, the server sends a ping; the client learns it in the
    /// handshake.
    public var pingInterval: Duration = .seconds(25)
    /// How long a ping may wait for its pong before the session is closed (`ping timeout`); the client learns it in
    /// the handshake.
    public var pingTimeout: Duration = .seconds(20)
    /// The largest message or polling body accepted, in bytes.
    public var maxPayload: Int = 1_000_000
    /// How long a WebSocket may take between `2probe` and `5`.
    public var upgradeTimeout: Duration = .seconds(10)
    /// A session that the layer above has not claimed within this time is closed (Socket.IO's connectTimeout).
    public var connectTimeout: Duration?
    /// The most bytes that may wait for one peer (WebSocket output or the polling buffer); a peer that lets more
    /// pile up is disconnected.
    public var outboundBacklogLimit: Int = 1 << 20
    /// The most open sessions per client address (nil: no limit); a handshake over it is answered 429.
    public var maxSessionsPerAddress: Int?
    /// Which peers' `X-Forwarded-For` / `X-Real-IP` name the client (the gateway's address).
    public var trustedProxies = TrustedProxies.loopback
    /// The headers (lower-cased names) a session keeps from the request that opened it, for the layer above's
    /// handshake; nil keeps them all. Each kept header costs memory for the life of the connection.
    public var retainedHeaders: Set<String>? = ["authorization"]

    /// The default settings; change the properties that need other values.
    public init() {}
}

/// The layer above Engine.IO: Socket.IO, or an echo for the conformance server.
public protocol EngineHandler: Sendable {
    /// A session opened; called before any of its messages is received. No task runs for a session while it is idle
    /// (a task keeps the deepest stack it ever needed until it ends), so work a message starts runs in tasks that end.
    func opened(_ session: EngineSession)
    /// One message from the peer; messages of a session arrive in order, one at a time. Called on the connection's
    /// event loop for WebSocket: it must not block, and queues what takes time (bounded, see Socket.IO's inbound limit).
    /// - Throws: ``EngineProtocolError`` to close the session for a protocol violation.
    func receive(_ message: EngineMessage, from session: EngineSession) throws(EngineProtocolError)
    /// The session closed.
    func closed(_ session: EngineSession, reason: EngineCloseReason) async
    /// Whether a handshake may open a session now; while false handshakes are answered 503 (a starting instance).
    var acceptsSessions: Bool { get }
}

extension EngineHandler {
    /// By default a handler accepts sessions as soon as it exists.
    public var acceptsSessions: Bool { true }
}

/// An Engine.IO v4 server: HTTP long-polling, WebSocket, the upgrade from one to the other, and the heartbeat.
/// Mount its HTTP routes with ``addRoutes(to:)`` and its WebSocket upgrade with ``RealtimeServerBuilder``; run
/// it in the service group (it supervises the sessions' heartbeats and closes them on shutdown).
public final class EngineServer: Service, Sendable {
    /// The settings the server was created with.
    public let configuration: EngineConfiguration
    let handler: any EngineHandler
    let logger: Logger
    struct Sessions {
        var byId: [String: EngineSession] = [:]
        /// Open sessions per client address (addresses with none are removed).
        var perAddress: [String: Int] = [:]
        /// Sessions a client closed with a poll on its way, which is answered with a noop if it comes within
        /// `owedNoopWindow` (oldest first; at most `owedNoopLimit`).
        var owedNoops: [(sid: String, noop: OwedCloseNoop, until: ContinuousClock.Instant)] = []
    }

    static let owedNoopWindow: Duration = .seconds(5)
    static let owedNoopLimit = 10_000

    let sessions = Mutex(Sessions())
    /// Sessions that closed, for `run` to tell the handler in a task of its own; a session holds no task while open.
    let ended: AsyncStream<EngineSession>
    let ender: AsyncStream<EngineSession>.Continuation
    let acceptingSessions = Atomic<Bool>(true)

    /// A server whose sessions' messages and closes go to `handler`.
    public init(configuration: EngineConfiguration, handler: some EngineHandler, logger: Logger) {
        self.configuration = configuration
        self.handler = handler
        self.logger = logger
        (ended, ender) = AsyncStream.makeStream(of: EngineSession.self)
    }

    /// The number of open sessions.
    public var sessionCount: Int { sessions.withLock { $0.byId.count } }

    /// Tells the handler of every session that closes, until shutdown has closed them all.
    public func run() async throws {
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for await session in ended {
                    group.addTask { await self.handler.closed(session, reason: session.closeReason ?? .serverClose) }
                }
            }
        } onGracefulShutdown: {
            self.shutDown()
        }
    }

    /// Stops accepting sessions and closes every open one; `run` ends once the last of them was handed over.
    public func shutDown() {
        acceptingSessions.store(false, ordering: .releasing)
        let open = sessions.withLock { sessions in
            if sessions.byId.isEmpty { ender.finish() }
            return Array(sessions.byId.values)
        }
        for session in open { session.close(.serverShutdown) }
    }

    /// Why a handshake opened no session.
    enum Refusal: Error {
        case starting
        case shuttingDown
        case tooManySessions
    }

    func openSession(
        query: [String: String], headers: HTTPFields, peer: SocketAddress?, transport: EngineSession.Transport
    ) -> Result<EngineSession, Refusal> {
        guard acceptingSessions.load(ordering: .acquiring) else { return .failure(.shuttingDown) }
        guard handler.acceptsSessions else { return .failure(.starting) }
        let headerValues = Self.headerValues(headers)
        let address = configuration.trustedProxies.clientAddress(peer: peer, headers: headerValues)
        let retainedHeaders = configuration.retainedHeaders.map { names in
            headerValues.filter { names.contains($0.key) }
        }
        let session = EngineSession(
            id: Self.makeSessionId(), query: query.filter { !Self.protocolQueryKeys.contains($0.key) },
            headers: retainedHeaders ?? headerValues, clientAddress: address, transport: transport,
            outboundLimit: configuration.outboundBacklogLimit
        )
        let refusal = sessions.withLock { sessions -> Refusal? in
            // Checked again under the lock: a shutdown either sees this session (and closes it) or refuses it.
            guard acceptingSessions.load(ordering: .acquiring) else { return .shuttingDown }
            if let address, let limit = configuration.maxSessionsPerAddress {
                guard sessions.perAddress[address, default: 0] < limit else { return .tooManySessions }
                sessions.perAddress[address, default: 0] += 1
            }
            sessions.byId[session.id] = session
            return nil
        }
        if let refusal {
            if refusal == .tooManySessions { RealtimeMetrics.sessionsRefused.increment() }
            return .failure(refusal)
        }
        handler.opened(session)
        session.onClose { [self] in remove(session, handingOver: true) }
        session.startHeartbeat(
            on: MultiThreadedEventLoopGroup.singleton.any(), interval: configuration.pingInterval,
            timeout: configuration.pingTimeout, connectTimeout: configuration.connectTimeout
        )
        return .success(session)
    }

    /// Forgets a closed session. `handingOver`: its close goes to `run` (to tell the handler), which ends after the
    /// last session that closes once shutdown began.
    func remove(_ session: EngineSession, handingOver: Bool = false) {
        let owedNoop = session.owedCloseNoop
        sessions.withLock { sessions in
            if let owedNoop {
                let now = ContinuousClock.now
                sessions.owedNoops.removeAll { $0.until < now }
                if sessions.owedNoops.count >= Self.owedNoopLimit { sessions.owedNoops.removeFirst() }
                sessions.owedNoops.append((session.id, owedNoop, now + Self.owedNoopWindow))
            }
            if sessions.byId.removeValue(forKey: session.id) != nil, let address = session.clientAddress,
                configuration.maxSessionsPerAddress != nil
            {
                sessions.perAddress[address, default: 1] -= 1
                if sessions.perAddress[address] == 0 { sessions.perAddress.removeValue(forKey: address) }
            }
            guard handingOver else { return }
            // Under the lock, so no close is yielded after the stream finished.
            ender.yield(session)
            if sessions.byId.isEmpty, !acceptingSessions.load(ordering: .acquiring) { ender.finish() }
        }
    }

    /// Whether a poll for `sid`, a session that is gone, is owed a noop (true once).
    func takeOwedNoop(sid: String) -> Bool {
        sessions.withLock { sessions in
            let now = ContinuousClock.now
            guard let index = sessions.owedNoops.firstIndex(where: { $0.sid == sid && $0.until >= now }) else {
                return false
            }
            return sessions.owedNoops.remove(at: index).noop.claim()
        }
    }

    static func refusalResponse(_ refusal: Refusal) -> Response {
        switch refusal {
        case .starting: error(.serviceUnavailable, code: 3, "Server starting", retryAfter: 1)
        case .shuttingDown: error(.serviceUnavailable, code: 3, "Server shutting down")
        case .tooManySessions: error(.tooManyRequests, code: 4, "Too many sessions from this address")
        }
    }

    func openPacket(for session: EngineSession, upgrades: [String]) -> EnginePacket {
        let body = JSONValue.object(
            JSONObject([
                ("sid", .string(session.id)), ("upgrades", .array(upgrades.map { .string($0) })),
                ("pingInterval", JSONValue(Int(configuration.pingInterval / .milliseconds(1)))),
                ("pingTimeout", JSONValue(Int(configuration.pingTimeout / .milliseconds(1)))),
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
    func handle(_ packet: EnginePacket, from session: EngineSession) -> Bool {
        switch packet.type {
        case .message:
            let message: EngineMessage =
                switch packet.payload {
                case .text(let text): .text(text)
                case .binary(let bytes): .binary(bytes)
                }
            do {
                try handler.receive(message, from: session)
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

    // MARK: Helpers

    /// The query parameters of the protocol itself, which a session does not keep.
    static let protocolQueryKeys: Set<String> = ["EIO", "transport", "sid", "t", "j", "b64"]

    /// The decoded query parameters of a request target's query; `=`, `a=` and `=b` are kept, never a crash.
    public static func query(of text: String?) -> [String: String] {
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
    static func error(
        _ status: HTTPResponse.Status, code: Int, _ message: String, retryAfter seconds: Int? = nil
    ) -> Response {
        let body = JSONValue.object(JSONObject([("code", JSONValue(code)), ("message", .string(message))])).serialized
        var headers: HTTPFields = [.contentType: "application/json", .contentLength: String(body.utf8.count)]
        if let seconds { headers[.retryAfter] = String(seconds) }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}
