import Contracts
import Foundation
import Logging
import Metrics
import NIOCore
import Synchronization

/// A Socket.IO namespace (`/chat`, `/rider`, ...): its authorization hook, event handlers, rooms and sockets.
/// Register everything before the server starts serving.
package final class SocketIONamespace: Sendable {
    package typealias EventHandler = @Sendable (SocketIOSocket, SocketIOArguments, SocketIOAck?) async -> Void
    package typealias Authorizer = @Sendable (SocketIOHandshake) async throws -> SocketIOCredentials?
    /// Given the user, the socket id and the rooms of a socket being recovered, the rooms it may have back.
    package typealias RecoveryCheck = @Sendable (any SocketIOUser, String, Set<String>) async -> Set<String>

    package let name: String
    let logger: Logger
    let server: SocketIOServer
    private let connectedGauge: Gauge

    private struct Registry: Sendable {
        var authorizer: Authorizer?
        var handlers: [String: EventHandler] = [:]
        var connectHandlers: [@Sendable (SocketIOSocket) async -> Void] = []
        var disconnectHandlers: [@Sendable (SocketIOSocket, SocketIODisconnectReason) async -> Void] = []
        var rateLimit: SocketIORateLimit?
        var recoveryCheck: RecoveryCheck?
    }

    private struct Members: Sendable {
        var sockets: [String: SocketIOSocket] = [:]
        var rooms: [String: [String: SocketIOSocket]] = [:]
    }

    private let registry = Mutex(Registry())
    private let members = Mutex(Members())

    init(name: String, server: SocketIOServer, logger: Logger) {
        self.name = name
        self.server = server
        self.logger = logger
        self.connectedGauge = Gauge(label: "socketio_connected_sockets", dimensions: [("namespace", name)])
    }

    // MARK: Registration

    /// Decides who may connect: return the credentials, or throw ``SocketIOConnectRefusal`` (sent as CONNECT_ERROR).
    /// Credentials with an expiry disconnect the socket then (after `token_expired`), unless refreshed.
    package func authorize(_ authorizer: @escaping Authorizer) {
        registry.withLock { $0.authorizer = authorizer }
    }

    /// Checks credentials: the authorizer decides who may connect, and a client may send new credentials with
    /// ``refreshCredentialsEvent`` `{token}` before its current ones expire (acknowledged with `{expiresAt}` or an
    /// error). The new credentials must be for the same user; the socket is then disconnected at their expiry.
    package func requireCredentials(_ authorizer: @escaping Authorizer) {
        authorize(authorizer)
        on(Self.refreshCredentialsEvent, CredentialsRefresh.self) { socket, request in
            var handshake = socket.handshake
            handshake.auth = .object(JSONObject([("token", .string(request.token))]))
            let credentials: SocketIOCredentials?
            do {
                credentials = try await authorizer(handshake)
            } catch let refusal as SocketIOConnectRefusal {
                throw SocketIOEventError(code: refusal.code ?? .unauthorized, message: refusal.message)
            }
            guard let credentials, credentials.user.userId == socket.user?.userId else {
                throw SocketIOEventError(code: .forbidden, message: "the new token is for another user")
            }
            socket.refresh(credentials)
            return CredentialsRefreshed(expiresAt: credentials.expiresAt)
        }
    }

    /// The event a client sends with a new token before its current one expires.
    package static let refreshCredentialsEvent = "refresh_token"
    /// The event a socket gets when its token expired, just before DISCONNECT.
    package static let tokenExpiredEvent = "token_expired"

    /// `refresh_token`'s payload.
    struct CredentialsRefresh: Codable, Sendable { var token: String }
    /// `refresh_token`'s acknowledgement.
    struct CredentialsRefreshed: Codable, Sendable { var expiresAt: Date? }

    /// Handles `event` with its raw arguments; `ack` is set when the client asked for an acknowledgement.
    package func on(_ event: String, handler: @escaping EventHandler) {
        registry.withLock { $0.handlers[event] = handler }
    }

    /// Handles `event` whose first argument decodes as `Payload`; the returned value is the acknowledgement.
    /// A payload that does not decode is answered `{"error":{"code":"VALIDATION_FAILED",...}}`; a ``CodedError``
    /// thrown by the handler with its code; anything else with `INTERNAL_ERROR` (and logged).
    package func on<Payload: Decodable & Sendable, Reply: Encodable & Sendable>(
        _ event: String, _ payload: Payload.Type,
        handler: @escaping @Sendable (SocketIOSocket, Payload) async throws -> Reply
    ) {
        let logger = self.logger
        on(event) { socket, arguments, ack in
            let reply: JSONValue
            do {
                guard let first = arguments.values.first else {
                    throw SocketIOEventError(code: .validationFailed, message: "\(event) needs a payload object")
                }
                let decoded: Payload
                do {
                    decoded = try first.decode(as: Payload.self)
                } catch {
                    throw DecodingProblem(error)
                }
                reply = try JSONValue(encoding: try await handler(socket, decoded))
            } catch let error as any CodedError {
                reply = SocketIOError.body(code: error.code, message: error.message)
            } catch {
                logger.error(
                    "\(event) handler failed",
                    metadata: ["error": "\(String(reflecting: error))", "socket.id": "\(socket.id)"])
                reply = SocketIOError.body(code: .internalError, message: "internal error")
            }
            ack?.send(SocketIOArguments([reply]))
        }
    }

    /// Decides which of its rooms a socket being recovered may have back (the user's access may have changed while
    /// it was away); it gets the emits it missed only in those. Without a check every room is restored.
    package func checkRecoveredRooms(_ check: @escaping RecoveryCheck) {
        registry.withLock { $0.recoveryCheck = check }
    }

    var recoveryCheck: RecoveryCheck? { registry.withLock { $0.recoveryCheck } }

    /// Runs after a socket connected (and joined its own rooms), or was recovered (``SocketIOSocket/recovered``).
    package func onConnect(_ handler: @escaping @Sendable (SocketIOSocket) async -> Void) {
        registry.withLock { $0.connectHandlers.append(handler) }
    }

    /// Runs after a socket left the namespace, whatever the reason.
    package func onDisconnect(_ handler: @escaping @Sendable (SocketIOSocket, SocketIODisconnectReason) async -> Void) {
        registry.withLock { $0.disconnectHandlers.append(handler) }
    }

    /// Limits incoming events per socket; events over the limit are answered `RATE_LIMITED` (or dropped if
    /// not acknowledged). Nil: the server's default (``SocketIOConfiguration/rateLimit``).
    package var rateLimit: SocketIORateLimit? {
        get { registry.withLock { $0.rateLimit } }
        set { registry.withLock { $0.rateLimit = newValue } }
    }

    /// The limit that applies: the namespace's own or the server's default.
    var effectiveRateLimit: SocketIORateLimit { rateLimit ?? server.configuration.rateLimit }

    /// Where per-socket deadlines are scheduled.
    var timers: any EventLoop { server.configuration.timers }

    // MARK: Emitting

    /// The instance this namespace runs on (``SocketIOServer/instanceId``).
    package var instanceId: String { server.instanceId }

    /// The room every socket of `userId` joins.
    package static func userRoom(_ userId: String) -> String { "user:\(userId)" }

    /// Emits to every socket in any of `rooms`, on every instance: through the realtime log, which gives the emit
    /// its recovery offset.
    /// - Parameters:
    ///   - dedupeKey: set when every instance emits the same thing (each consumed the same event): only the first
    ///     emit with the key is delivered.
    ///   - latestKey: only the latest matters (a position): an emit of `event` with the same key that still waits
    ///     for a slow client is dropped for the newer one (Socket.IO's volatile emits, but keeping the newest), and
    ///     recovery replays only the latest.
    package func emit(
        _ event: String, _ arguments: SocketIOArguments, toRooms rooms: [String], except: Set<String> = [],
        dedupeKey: String? = nil, latestKey: String? = nil
    ) async {
        let packets = SocketIOConnection.eventPackets(namespace: name, event: event, arguments: arguments, ackId: nil)
        let key = latestKey.map { Self.pendingKey(namespace: name, event: event, key: $0) }
        server.broadcast(
            namespace: self, rooms: rooms, except: except, packets: packets, latestKey: key,
            dedupeKey: dedupeKey.map { "\(name)|\(event)|\($0)" })
    }

    /// The key of a replaceable pending packet: the same key of another event or namespace is another packet.
    static func pendingKey(namespace: String, event: String, key: String) -> String { "\(namespace)|\(event)|\(key)" }

    /// Emits one payload (encoded with the contracts' JSON coding) to every socket in `room`.
    /// - Parameter latestKey: see ``emit(_:_:toRooms:except:dedupeKey:latestKey:)``.
    package func emit(
        _ event: String, _ payload: some Encodable, toRoom room: String, dedupeKey: String? = nil,
        latestKey: String? = nil
    ) async {
        do {
            await emit(
                event, try SocketIOArguments(encoding: payload), toRooms: [room], dedupeKey: dedupeKey,
                latestKey: latestKey)
        } catch {
            logger.error("could not encode \(event)", metadata: ["error": "\(error)"])
        }
    }

    /// Emits to every socket of `userId` (on every instance).
    package func emit(_ event: String, _ payload: some Encodable, toUser userId: String, dedupeKey: String? = nil)
        async
    {
        await emit(event, payload, toRoom: Self.userRoom(userId), dedupeKey: dedupeKey)
    }

    /// The sockets in `room` on this instance.
    package func sockets(in room: String) -> [SocketIOSocket] {
        members.withLock { Array(($0.rooms[room] ?? [:]).values) }
    }

    /// The sockets of this namespace on this instance.
    package var sockets: [SocketIOSocket] { members.withLock { Array($0.sockets.values) } }

    /// Sends already encoded packets to the local sockets in `rooms`, each socket once; `offset` is the emit's
    /// position in the realtime log.
    func deliver(
        _ packets: [EnginePacket], toRooms rooms: [String], except: Set<String>, latestKey: String? = nil,
        offset: Int64? = nil
    ) {
        let targets = members.withLock { members -> [SocketIOSocket] in
            if rooms.count == 1 {
                return (members.rooms[rooms[0]] ?? [:]).values.filter { !except.contains($0.id) }
            }
            var seen = Set<String>()
            var targets: [SocketIOSocket] = []
            for room in rooms {
                for (id, socket) in members.rooms[room] ?? [:] where !except.contains(id) && seen.insert(id).inserted {
                    targets.append(socket)
                }
            }
            return targets
        }
        for socket in targets {
            if let offset { socket.sent(offset) }
            socket.connection.send(packets, latestKey: latestKey)
        }
    }

    // MARK: Membership

    var authorizer: Authorizer? { registry.withLock { $0.authorizer } }

    func handler(for event: String) -> EventHandler? { registry.withLock { $0.handlers[event] } }

    /// Adds the socket and its own rooms (its id, its user's; a recovered socket's others too): emits to them
    /// reach it from now on.
    func register(_ socket: SocketIOSocket, rooms: Set<String> = []) {
        let count = members.withLock { members -> Int in
            members.sockets[socket.id] = socket
            return members.sockets.count
        }
        connectedGauge.record(count)
        socket.join(socket.id)
        if let user = socket.user { socket.join(Self.userRoom(user.userId)) }
        for room in rooms { socket.join(room) }
    }

    /// Runs the connect handlers of a registered socket, then records its session for recovery.
    func connected(_ socket: SocketIOSocket) async {
        for handler in registry.withLock({ $0.connectHandlers }) { await handler(socket) }
        socket.markAnnounced()
        server.record(socket, state: .connected)
    }

    func disconnected(_ socket: SocketIOSocket, reason: SocketIODisconnectReason) async {
        let rooms = socket.markDisconnected()
        // A socket restored meanwhile (same id, another object) keeps its place.
        let count = members.withLock { members -> Int in
            if members.sockets[socket.id] === socket { members.sockets.removeValue(forKey: socket.id) }
            for room in rooms where members.rooms[room]?[socket.id] === socket {
                members.rooms[room]?.removeValue(forKey: socket.id)
                if members.rooms[room]?.isEmpty == true { members.rooms.removeValue(forKey: room) }
            }
            return members.sockets.count
        }
        connectedGauge.record(count)
        // Restored on another instance: the session lives there now.
        if socket.movedAway { return }
        server.record(socket, state: reason.isRecoverable ? .disconnected : .ended, rooms: rooms)
        for handler in registry.withLock({ $0.disconnectHandlers }) { await handler(socket, reason) }
    }

    func add(_ socket: SocketIOSocket, to room: String) {
        members.withLock { $0.rooms[room, default: [:]][socket.id] = socket }
    }

    func remove(_ socket: SocketIOSocket, from room: String) {
        members.withLock { members in
            guard members.rooms[room]?[socket.id] === socket else { return }
            members.rooms[room]?.removeValue(forKey: socket.id)
            if members.rooms[room]?.isEmpty == true { members.rooms.removeValue(forKey: room) }
        }
    }
}
