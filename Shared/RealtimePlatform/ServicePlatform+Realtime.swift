import Foundation
import Hummingbird
import Logging
import PostgresNIO
import Realtime
import ServiceKit

/// Real-time settings read from the environment.
package struct RealtimeSettings: Sendable {
    /// `SOCKETIO_PATH`, default `/socket.io`.
    package var path: String
    /// `SOCKETIO_PING_INTERVAL_MS`, default 25000.
    package var pingInterval: Duration
    /// `SOCKETIO_PING_TIMEOUT_MS`, default 20000.
    package var pingTimeout: Duration
    /// `SOCKETIO_MAX_PAYLOAD`, default 1,000,000 bytes.
    package var maxPayload: Int
    /// `SOCKETIO_CONNECT_TIMEOUT_MS`, default 20000: a session that joins no namespace within it is closed.
    package var connectTimeout: Duration
    /// `SOCKETIO_OUTBOUND_BACKLOG_BYTES`, default 1 MiB: bytes that may wait for one client that does not read.
    package var outboundBacklogLimit: Int
    /// `SOCKETIO_INBOUND_BACKLOG_BYTES`, default 1 MiB: bytes of one connection's packets that may wait to be
    /// handled.
    package var inboundBacklogLimit: Int
    /// `SOCKETIO_RATE_LIMIT_PER_SECOND` (default 20) and `SOCKETIO_RATE_LIMIT_BURST` (default 50): events per
    /// socket in namespaces that set no limit of their own.
    package var rateLimit: SocketIORateLimit
    /// `SOCKETIO_MAX_SESSIONS_PER_ADDRESS`, default 200 (0: no limit): open sessions per client address, a backstop
    /// behind the gateway's tighter `limit_conn` (one carrier NAT address can carry many phones).
    package var maxSessionsPerAddress: Int?
    /// `SOCKETIO_TRUSTED_PROXIES`, default `127.0.0.1,::1`: addresses or IPv4 CIDR ranges of proxies whose
    /// `X-Forwarded-For` / `X-Real-IP` name the client.
    package var trustedProxies: TrustedProxies
    /// `SOCKETIO_RECOVERY_WINDOW_MS` (default 120000; 0 turns recovery off): how long after a dropped connection a
    /// client recovers its session and missed emits.
    package var recovery: SocketIORecoverySettings?

    package init(environment: ServiceEnvironment) throws(ConfigurationError) {
        path = environment.optional("SOCKETIO_PATH") ?? "/socket.io"
        guard path.hasPrefix("/") else {
            throw ConfigurationError(variable: "SOCKETIO_PATH", problem: "'\(path)' must start with /")
        }
        pingInterval = try environment.milliseconds(
            "SOCKETIO_PING_INTERVAL_MS", default: .seconds(25), in: 100...600_000)
        pingTimeout = try environment.milliseconds("SOCKETIO_PING_TIMEOUT_MS", default: .seconds(20), in: 100...600_000)
        maxPayload = try environment.int("SOCKETIO_MAX_PAYLOAD", default: 1_000_000, in: 1_024...100_000_000)
        connectTimeout = try environment.milliseconds(
            "SOCKETIO_CONNECT_TIMEOUT_MS", default: .seconds(20), in: 100...600_000)
        outboundBacklogLimit = try environment.int(
            "SOCKETIO_OUTBOUND_BACKLOG_BYTES", default: 1 << 20, in: 1_024...1_000_000_000)
        inboundBacklogLimit = try environment.int(
            "SOCKETIO_INBOUND_BACKLOG_BYTES", default: 1 << 20, in: 1_024...1_000_000_000)
        rateLimit = SocketIORateLimit(
            eventsPerSecond: try environment.double("SOCKETIO_RATE_LIMIT_PER_SECOND", default: 20, in: 0.1...100_000),
            burst: try environment.int("SOCKETIO_RATE_LIMIT_BURST", default: 50, in: 1...1_000_000)
        )
        let sessions = try environment.int("SOCKETIO_MAX_SESSIONS_PER_ADDRESS", default: 200, in: 0...10_000_000)
        maxSessionsPerAddress = sessions == 0 ? nil : sessions
        let window = try environment.milliseconds(
            "SOCKETIO_RECOVERY_WINDOW_MS", default: .seconds(120), in: 0...3_600_000)
        if window > .zero {
            var recovery = SocketIORecoverySettings()
            recovery.window = window
            self.recovery = recovery
        }
        let proxies = (environment.optional("SOCKETIO_TRUSTED_PROXIES") ?? "127.0.0.1,::1")
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        do {
            trustedProxies = try TrustedProxies(proxies)
        } catch {
            throw ConfigurationError(
                variable: "SOCKETIO_TRUSTED_PROXIES", problem: "'\(error.entry)' is not an IP address or IPv4 range")
        }
    }
}

/// A service's real-time side: its Socket.IO server, and the store in the service's own schema that its instances
/// share (streams per room, latest values, sessions).
package struct ServiceRealtime: Sendable {
    package let server: RealtimeServer
    package let store: PostgresRealtimeStore

    /// The namespace `name`, e.g. `/chat`.
    package func namespace(_ name: String) -> SocketIONamespace { server.namespace(name) }

    /// The instance this server runs as (the owner of its sessions).
    package var instanceId: String { server.socketIO.instanceId }

    /// Emits to the sockets of `namespace`, written in the caller's transaction and numbered as `numbering` says.
    package func emitter(for namespace: SocketIONamespace, numbering: EmitNumbering = .inPlace) -> RealtimeEmitter {
        RealtimeEmitter(namespace: namespace, store: store, numbering: numbering)
    }
}

/// Emits written in the transaction of the change that causes them (a chat message and its `message`, an order's
/// status and its `order_update`): delivered once that transaction commits, to every instance's sockets in the
/// room, and never if it rolls back.
package struct RealtimeEmitter: Sendable {
    package let namespace: SocketIONamespace
    let store: PostgresRealtimeStore
    /// When the emits it writes itself take their offsets (a call inside a caller's statement decides its own).
    let numbering: EmitNumbering

    /// Emits to `namespace`'s sockets through `store`, the one its server follows, numbered as `numbering` says.
    package init(namespace: SocketIONamespace, store: PostgresRealtimeStore, numbering: EmitNumbering = .inPlace) {
        self.namespace = namespace
        self.store = store
        self.numbering = numbering
    }

    /// Emits `event` with `arguments` to `room` (but the socket `except`) when `connection`'s transaction commits.
    package func emit(
        _ event: String, _ arguments: SocketIOArguments, toRoom room: String, except: String? = nil,
        on connection: PostgresConnection
    ) async throws {
        try await emit(event, arguments, toRooms: [room], except: except, on: connection)
    }

    /// Emits `event` with `arguments` to each of `rooms` in one statement when `connection`'s transaction commits.
    /// Pass `rooms` sorted, and emit last in the transaction.
    package func emit(
        _ event: String, _ arguments: SocketIOArguments, toRooms rooms: [String], except: String? = nil,
        on connection: PostgresConnection
    ) async throws {
        try await store.append(
            roomEmit(namespace.eventPacket(event, arguments), toRooms: rooms, except: except), toRooms: rooms,
            numbering: numbering,
            on: connection)
    }

    /// The emit of `packet` (``SocketIONamespace/eventPacket(_:_:)``'s text and attachments, or a typed emit's text)
    /// to `rooms` (but the socket `except`), as the store writes it.
    private func roomEmit(
        _ packet: (text: String, attachments: [[UInt8]]), toRooms rooms: [String], except: String?
    ) -> RoomEmit {
        RoomEmit(
            namespace: namespace.name, room: rooms.first ?? "", packet: packet.text, attachments: packet.attachments,
            except: except)
    }

    /// Closes `room`'s latest values of `keys` when the transaction commits: none written by any instance after it
    /// reaches a socket (``PostgresRealtimeStore/closeLatest(namespace:room:keys:on:)``). Call it before the
    /// transaction's emits.
    package func closeLatest(_ keys: [String], inRoom room: String, on connection: PostgresConnection) async throws {
        try await store.closeLatest(namespace: namespace.name, room: room, keys: keys, on: connection)
    }

    /// Takes `userId`'s sockets out of `room` on every instance when the transaction commits, in order with the
    /// emits: none of `room`'s emits committed after reaches them. A server that lost the store's notices meanwhile
    /// misses it (``PostgresRealtimeStore/leave(namespace:socketsIn:room:on:)``).
    package func removeUser(_ userId: String, fromRoom room: String, on connection: PostgresConnection) async throws {
        try await store.leave(
            namespace: namespace.name, socketsIn: SocketIONamespace.userRoom(userId), room: room, on: connection)
    }

    /// Opens `room`'s closed latest values again when the transaction commits. Call it before the transaction's
    /// emits.
    package func reopenLatest(inRoom room: String, on connection: PostgresConnection) async throws {
        try await store.reopenLatest(namespace: namespace.name, room: room, on: connection)
    }

    /// Emits one payload (encoded with the namespace's coding) to `room` when the transaction commits.
    package func emit(
        _ event: String, _ payload: some Encodable, toRoom room: String, except: String? = nil,
        on connection: PostgresConnection
    ) async throws {
        try await store.append(
            roomEmit((try namespace.eventPacket(event, encoding: payload), []), toRooms: [room], except: except),
            toRooms: [room], numbering: numbering,
            on: connection)
    }

    /// The call that writes an emit numbered as `numbering` says inside a statement of the caller's (a change, its
    /// emit and its events in one round trip), its parameters numbered from `first`; their values are
    /// ``appendEmitArguments(_:_:toRooms:except:to:)``'s, the same for either numbering.
    package static func emitCall(numbering: EmitNumbering, parametersFrom first: Int) -> String {
        PostgresRealtimeStore.emitCall(numbering: numbering, parametersFrom: first)
    }

    /// Appends the values of ``emitCall(numbering:parametersFrom:)`` that emit `event` with `payload` to each of
    /// `rooms` (but the socket `except`) to `bindings`. Pass `rooms` sorted.
    package func appendEmitArguments(
        _ event: String, _ payload: some Encodable, toRooms rooms: [String], except: String? = nil,
        to bindings: inout PostgresBindings
    ) throws {
        try store.appendEmitArguments(
            roomEmit((try namespace.eventPacket(event, encoding: payload), []), toRooms: rooms, except: except),
            toRooms: rooms, to: &bindings)
    }

    /// Appends the values of ``emitCall(numbering:parametersFrom:)`` that emit `event` with `arguments` to each of
    /// `rooms` (none: the call writes nothing) to `bindings`. Pass `rooms` sorted.
    package func appendEmitArguments(
        _ event: String, _ arguments: SocketIOArguments, toRooms rooms: [String], except: String? = nil,
        to bindings: inout PostgresBindings
    ) throws {
        try store.appendEmitArguments(
            roomEmit(namespace.eventPacket(event, arguments), toRooms: rooms, except: except), toRooms: rooms,
            to: &bindings)
    }

    /// Emits one payload to every socket of `userId` when the transaction commits.
    package func emit(
        _ event: String, _ payload: some Encodable, toUser userId: String, on connection: PostgresConnection
    ) async throws {
        try await emit(event, payload, toRoom: SocketIONamespace.userRoom(userId), on: connection)
    }
}

extension ServicePlatform {
    /// The service's Socket.IO server, with its store in the service's schema: emits reach sockets held by every
    /// instance, and clients recover on any of them. Adds the `realtime` check to `/ready` (down until the
    /// instance follows the store's notices) and the store's trimming.
    package mutating func makeRealtimeServer(environment: ServiceEnvironment) async throws -> ServiceRealtime {
        let settings = try RealtimeSettings(environment: environment)
        var engine = EngineConfiguration()
        engine.path = settings.path
        engine.pingInterval = settings.pingInterval
        engine.pingTimeout = settings.pingTimeout
        engine.maxPayload = settings.maxPayload
        engine.connectTimeout = settings.connectTimeout
        engine.outboundBacklogLimit = settings.outboundBacklogLimit
        engine.maxSessionsPerAddress = settings.maxSessionsPerAddress
        engine.trustedProxies = settings.trustedProxies
        var socketIO = SocketIOConfiguration.platform()
        socketIO.rateLimit = settings.rateLimit
        socketIO.inboundBacklogLimit = settings.inboundBacklogLimit
        socketIO.recovery = settings.recovery
        let now = self.now
        socketIO.now = { now() }
        let store = PostgresRealtimeStore(
            database: database, retention: (settings.recovery ?? SocketIORecoverySettings()).retention, now: now,
            logger: logger)
        addService(store)
        addPeriodicJob(every: .seconds(30), failure: "could not trim the realtime store") { try await store.trim() }
        let server = RealtimeServer(configuration: engine, socketIO: socketIO, store: store, logger: logger)
        addReadinessCheck(
            ReadinessCheck(name: "realtime") {
                guard server.isFollowing else { throw Degradation("not following the realtime store's notices yet") }
            })
        return ServiceRealtime(server: server, store: store)
    }

    /// The application with `realtime` mounted: its polling routes on `router`, WebSocket upgrades, and the
    /// realtime server stopping (disconnecting every socket) before the HTTP server.
    package func makeApplication(router: Router<ServiceRequestContext>, realtime: ServiceRealtime)
        -> ServiceApplication
    {
        realtime.server.addRoutes(to: router)
        return makeApplication(
            router: router,
            server: RealtimeServerBuilder.http1WithWebSockets(
                [realtime.server.engine], firstRequestTimeout: configuration.http.firstRequestTimeout,
                idleTimeout: configuration.http.idleTimeout),
            servicesShutDownFirst: [realtime.server]
        )
    }
}
