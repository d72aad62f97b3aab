import Foundation
import Logging
import Metrics
import NIOCore
import Synchronization

/// A Socket.IO namespace (`/chat`, `/rider`, ...): its authorization hook, event handlers, rooms and sockets.
/// Register everything before the server starts serving.
public final class SocketIONamespace: Sendable {
    /// Handles an event: the socket, the event's arguments (its name removed) and the acknowledgement if the client
    /// asked for one.
    public typealias EventHandler = @Sendable (SocketIOSocket, SocketIOArguments, SocketIOAck?) async -> Void
    /// Decides whether a handshake may connect: credentials, nil to let it in without a user, or a thrown
    /// ``SocketIOConnectRefusal``; any other error refuses it as `INTERNAL_ERROR` (and is logged).
    public typealias Authorizer = @Sendable (SocketIOHandshake) async throws -> SocketIOCredentials?
    /// Given the user, the socket id and the rooms of a socket being recovered, the rooms it may have back.
    public typealias RecoveryCheck = @Sendable (any SocketIOUser, String, Set<String>) async -> Set<String>

    /// The namespace's name, always starting with `/` (e.g. `/chat`); `/` is the main namespace.
    public let name: String
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

    /// The sockets on this instance, the rooms they are in, and a feed of each such room's stream: one lock, so a
    /// socket joins a room at the position its feed has delivered up to, and a delivery reaches exactly the sockets
    /// in the room when the feed moves past it.
    private struct Members: Sendable {
        var sockets: [String: SocketIOSocket] = [:]
        /// The sockets with a recovery session, by its pid: a session claimed elsewhere finds its socket here.
        var sessions: [String: SocketIOSocket] = [:]
        var rooms: [String: [String: SocketIOSocket]] = [:]
        var feeds: [String: Feed] = [:]
        /// Numbers feeds, so that the store's answer to a feed that closed meanwhile is not taken by a later one.
        var nextFeed = 0
    }

    /// A room's feed, and who holds it open without a socket in the room (a restore reading what a client missed).
    private struct Feed: Sendable {
        var feed = RoomFeed()
        var id: Int
        var pins = 0
        /// Whether a task waits for it to open (in ``feedOpenings``).
        var awaited = false
    }

    private let registry = Mutex(Registry())
    private let members = Mutex(Members())
    /// Tasks waiting for a feed to open, by feed id.
    private let feedOpenings = Waiters<Int>()

    init(name: String, server: SocketIOServer, logger: Logger) {
        self.name = name
        self.server = server
        self.logger = logger
        self.connectedGauge = Gauge(label: "socketio_connected_sockets", dimensions: [("namespace", name)])
    }

    // MARK: Registration

    /// Decides who may connect: return the credentials, or throw ``SocketIOConnectRefusal`` (sent as CONNECT_ERROR).
    /// Credentials with an expiry disconnect the socket then (after `token_expired`), unless refreshed.
    public func authorize(_ authorizer: @escaping Authorizer) {
        registry.withLock { $0.authorizer = authorizer }
    }

    /// Checks credentials: the authorizer decides who may connect, and a client may send new credentials with
    /// ``refreshCredentialsEvent`` `{token}` before its current ones expire (acknowledged with `{expiresAt}` or an
    /// error). The new credentials must be for the same user; the socket is then disconnected at their expiry.
    public func requireCredentials(_ authorizer: @escaping Authorizer) {
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
    public static let refreshCredentialsEvent = "refresh_token"
    /// The event a socket gets when its token expired, just before DISCONNECT.
    public static let tokenExpiredEvent = "token_expired"

    /// `refresh_token`'s payload.
    struct CredentialsRefresh: Codable, Sendable { var token: String }
    /// `refresh_token`'s acknowledgement.
    struct CredentialsRefreshed: Codable, Sendable { var expiresAt: Date? }

    /// Handles `event` with its raw arguments; `ack` is set when the client asked for an acknowledgement.
    public func on(_ event: String, handler: @escaping EventHandler) {
        registry.withLock { $0.handlers[event] = handler }
    }

    /// Handles `event` whose first argument decodes as `Payload` (with ``SocketIOConfiguration/coding``); the
    /// returned value is the acknowledgement. A missing payload or one that does not decode, and whatever the handler
    /// throws, is answered as ``SocketIOConfiguration/describeError`` says; an error it does not describe with
    /// `INTERNAL_ERROR` (and logged).
    public func on<Payload: Decodable & Sendable, Reply: Encodable & Sendable>(
        _ event: String, _ payload: Payload.Type,
        handler: @escaping @Sendable (SocketIOSocket, Payload) async throws -> Reply
    ) {
        let logger = self.logger
        let configuration = server.configuration
        on(event) { socket, arguments, ack in
            let reply: JSONValue
            do {
                guard let first = arguments.values.first else {
                    throw SocketIOEventError(code: .validationFailed, message: "\(event) needs a payload object")
                }
                let decoded: Payload
                do {
                    decoded = try first.decode(as: Payload.self, with: configuration.coding)
                } catch {
                    throw SocketIOPayloadError(event: event, underlying: error)
                }
                reply = try JSONValue(encoding: try await handler(socket, decoded), with: configuration.coding)
                // A client that has the answer to its `join` recovers into that room: the store has it first.
                if socket.hasUnsavedRooms { await socket.untilRoomsSaved(timeout: .seconds(5)) }
            } catch {
                if let answer = configuration.describeError(error) {
                    reply = answer.body
                } else {
                    logger.error(
                        "\(event) handler failed",
                        metadata: ["error": "\(String(reflecting: error))", "socket.id": "\(socket.id)"])
                    reply = SocketIOEventError(code: .internalError, message: "internal error").body
                }
            }
            ack?.send(SocketIOArguments([reply]))
        }
    }

    /// Decides which of its rooms a socket being recovered may have back (the user's access may have changed while
    /// it was away); it gets the emits it missed only in those. Without a check every room is restored.
    public func checkRecoveredRooms(_ check: @escaping RecoveryCheck) {
        registry.withLock { $0.recoveryCheck = check }
    }

    var recoveryCheck: RecoveryCheck? { registry.withLock { $0.recoveryCheck } }

    /// How long a session write or a restore waits at a time for a room's feed to open (the store's answer, and its
    /// mark).
    static let openTimeout = Duration.seconds(5)

    /// Runs after a socket connected (and joined its own rooms), or was recovered (``SocketIOSocket/recovered``).
    public func onConnect(_ handler: @escaping @Sendable (SocketIOSocket) async -> Void) {
        registry.withLock { $0.connectHandlers.append(handler) }
    }

    /// Runs after a socket left the namespace, whatever the reason.
    public func onDisconnect(_ handler: @escaping @Sendable (SocketIOSocket, SocketIODisconnectReason) async -> Void) {
        registry.withLock { $0.disconnectHandlers.append(handler) }
    }

    /// Limits incoming events per socket; events over the limit are answered `RATE_LIMITED` (or dropped if
    /// not acknowledged). Nil: the server's default (``SocketIOConfiguration/rateLimit``).
    public var rateLimit: SocketIORateLimit? {
        get { registry.withLock { $0.rateLimit } }
        set { registry.withLock { $0.rateLimit = newValue } }
    }

    /// The limit that applies: the namespace's own or the server's default.
    var effectiveRateLimit: SocketIORateLimit { rateLimit ?? server.configuration.rateLimit }

    /// Where per-socket deadlines are scheduled.
    var timers: any EventLoop { server.configuration.timers }

    // MARK: Emitting

    /// The instance this namespace runs on (``SocketIOServer/instanceId``).
    public var instanceId: String { server.instanceId }

    /// Returns once this instance has applied the store's notice of every change committed before the call (every
    /// ``RealtimeNotice/leave(namespace:socketsIn:room:)`` among them): a socket admitted to a room after it is not
    /// taken out by an older change's late notice.
    public func noticesCaughtUp() async throws { try await server.noticesCaughtUp() }

    /// The room every socket of `userId` joins.
    public static func userRoom(_ userId: String) -> String { "user:\(userId)" }

    /// The Socket.IO packet of `event` with `arguments` in this namespace, for a store: its text and attachments.
    public func eventPacket(_ event: String, _ arguments: SocketIOArguments) -> (text: String, attachments: [[UInt8]]) {
        let packets = SocketIOConnection.eventPackets(namespace: name, event: event, arguments: arguments, ackId: nil)
        var text = ""
        var attachments: [[UInt8]] = []
        for packet in packets {
            switch packet.payload {
            case .text(let value): text = value
            case .binary(let bytes): attachments.append(bytes)
            }
        }
        return (text, attachments)
    }

    /// Emits to every socket in `room`, on every instance, in a store transaction of its own: appended to the
    /// room's stream (the offset clients recover with), or, with `latestKey`, kept as the room's latest value of
    /// that key (Socket.IO's volatile emits, but keeping the newest: a pending one waiting for a slow client is
    /// replaced, and a recovered client gets the latest again). An emit that is part of a change is better written
    /// in the change's own transaction (the platform's emitter does that).
    /// - Parameter except: a socket that does not get it (the sender's).
    public func emit(
        _ event: String, _ arguments: SocketIOArguments, toRoom room: String, except: String? = nil,
        latestKey: String? = nil
    ) async throws {
        let (packet, attachments) = eventPacket(event, arguments)
        try await server.store.append(
            RoomEmit(
                namespace: name, room: room, packet: packet, attachments: attachments, except: except,
                latestKey: latestKey))
    }

    /// Emits one payload (encoded with ``SocketIOConfiguration/coding``) to every socket in `room`.
    public func emit(
        _ event: String, _ payload: some Encodable, toRoom room: String, latestKey: String? = nil
    ) async throws {
        try await server.store.append(
            RoomEmit(
                namespace: name, room: room, packet: try eventPacket(event, encoding: payload), latestKey: latestKey))
    }

    /// The text of the Socket.IO packet of `event` with one argument, `payload` as ``SocketIOConfiguration/coding``
    /// writes it (JSON text), for a store. The coding's text goes in as written: parsing it and writing it again
    /// cost the location service about 5% of its CPU. Text with a control character (whitespace between tokens: in
    /// a JSON string they are escaped) is written again compactly, as store notices are tab-separated lines.
    public func eventPacket(_ event: String, encoding payload: some Encodable) throws -> String {
        let json = try server.configuration.coding.encode(payload)
        guard !json.contains(where: { $0 < 0x20 }), !json.isEmpty else {
            return eventPacket(event, SocketIOArguments([try JSONValue.parse(Array(json))])).text
        }
        var text = SocketIOPacket(type: .event, namespace: name, data: .array([.string(event)])).encoded
        text.removeLast()
        text += ","
        text += String(decoding: json, as: UTF8.self)
        text += "]"
        return text
    }

    /// One argument encoded from `value` with the server's ``SocketIOConfiguration/coding``.
    public func arguments(encoding value: some Encodable) throws -> SocketIOArguments {
        SocketIOArguments([try JSONValue(encoding: value, with: server.configuration.coding)])
    }

    /// Emits to every socket of `userId` (on every instance).
    public func emit(_ event: String, _ payload: some Encodable, toUser userId: String) async throws {
        try await emit(event, payload, toRoom: Self.userRoom(userId))
    }

    /// The key of a replaceable pending packet: a room's latest value of a key.
    static func pendingKey(namespace: String, room: String, key: String) -> String { "\(namespace)|\(room)|\(key)" }

    /// The sockets in `room` on this instance.
    public func sockets(in room: String) -> [SocketIOSocket] {
        members.withLock { Array(($0.rooms[room] ?? [:]).values) }
    }

    /// The sockets of this namespace on this instance.
    public var sockets: [SocketIOSocket] { members.withLock { Array($0.sockets.values) } }

    /// The socket here of recovery session `pid`, if any.
    func socket(session pid: String) -> SocketIOSocket? { members.withLock { $0.sessions[pid] } }

    // MARK: Membership

    var authorizer: Authorizer? { registry.withLock { $0.authorizer } }

    func handler(for event: String) -> EventHandler? { registry.withLock { $0.handlers[event] } }

    /// Adds a new socket and its own rooms (its id, its user's): emits to them reach it from now on.
    func register(_ socket: SocketIOSocket) {
        let count = members.withLock { members -> Int in
            members.sockets[socket.id] = socket
            if let pid = socket.pid { members.sessions[pid] = socket }
            return members.sockets.count
        }
        connectedGauge.record(count)
        socket.join(socket.id, new: true)
        if let user = socket.user { socket.join(Self.userRoom(user.userId)) }
    }

    /// Runs the connect handlers of a registered socket, then writes its session for recovery.
    func connected(_ socket: SocketIOSocket) async {
        for handler in registry.withLock({ $0.connectHandlers }) { await handler(socket) }
        socket.markAnnounced()
    }

    func disconnected(_ socket: SocketIOSocket, reason: SocketIODisconnectReason) async {
        let rooms = socket.markDisconnected(recoverable: reason.isRecoverable)
        // A socket restored meanwhile (same id, another object) keeps its place.
        let count = members.withLock { members -> Int in
            if members.sockets[socket.id] === socket { members.sockets.removeValue(forKey: socket.id) }
            if let pid = socket.pid, members.sessions[pid] === socket { members.sessions.removeValue(forKey: pid) }
            for room in rooms where members.rooms[room]?[socket.id] === socket {
                members.rooms[room]?.removeValue(forKey: socket.id)
                closeFeedIfUnused(room, in: &members)
            }
            return members.sockets.count
        }
        connectedGauge.record(count)
        // Restored on another instance: the session lives there now.
        if socket.movedAway { return }
        for handler in registry.withLock({ $0.disconnectHandlers }) { await handler(socket, reason) }
    }

    /// A socket joined `room`: it gets the room's emits after the position the room's feed delivered up to (the
    /// feed opens if this instance did not follow the room; the socket's position is then set when it has).
    /// - Parameter new: nothing can have been emitted to the room (a new socket's own): its feed opens at once.
    func add(_ socket: SocketIOSocket, to room: String, new: Bool = false) {
        members.withLock { members in
            members.rooms[room, default: [:]][socket.id] = socket
            if var feed = members.feeds[room] {
                feed.feed.rejoined(socket.id)
                members.feeds[room] = feed
                socket.joined(room, at: feed.feed.state == .opening ? nil : feed.feed.position)
            } else if new {
                let id = members.nextFeed
                members.nextFeed += 1
                var feed = Feed(id: id)
                _ = feed.feed.opened(at: .start)
                members.feeds[room] = feed
                socket.joined(room, at: .start)
            } else {
                socket.joined(room, at: nil)
                openFeed(room, in: &members)
            }
        }
    }

    /// A socket already in `room` joined it again: a leave its room's feed holds (told before) does not take it out.
    /// Whether it is still in the room.
    func rejoined(_ socket: SocketIOSocket, room: String) -> Bool {
        members.withLock { members in
            guard members.rooms[room]?[socket.id] === socket else { return false }
            if var feed = members.feeds[room] {
                feed.feed.rejoined(socket.id)
                members.feeds[room] = feed
            }
            return true
        }
    }

    func remove(_ socket: SocketIOSocket, from room: String) {
        members.withLock { members in
            guard members.rooms[room]?[socket.id] === socket else { return }
            members.rooms[room]?.removeValue(forKey: socket.id)
            closeFeedIfUnused(room, in: &members)
        }
    }

    // MARK: Feeds

    private func openFeed(_ room: String, in members: inout Members) {
        let id = members.nextFeed
        members.nextFeed += 1
        members.feeds[room] = Feed(id: id)
        server.ask(.positions(namespace: self, feeds: [(room, id)]))
    }

    private func closeFeedIfUnused(_ room: String, in members: inout Members) {
        guard members.rooms[room]?.isEmpty ?? true else { return }
        members.rooms.removeValue(forKey: room)
        guard let feed = members.feeds[room], feed.pins == 0 else { return }
        members.feeds.removeValue(forKey: room)
        // Whoever waited for it to open (a session being written) goes on: the room is no longer followed here.
        if feed.awaited { feedOpenings.resume(feed.id) }
    }

    /// Whether feed `id` of `room` is still open (the store's answer for a feed that closed is dropped).
    func isFeedOpen(_ room: String, feed id: Int) -> Bool { members.withLock { $0.feeds[room]?.id == id } }

    /// A notice of `room`'s stream from the store.
    func received(room: String, _ notice: RoomFeed.Notice) {
        members.withLock { members in
            guard var feed = members.feeds[room] else { return }
            let steps = feed.feed.received(notice)
            members.feeds[room] = feed
            perform(steps, room: room, in: &members)
        }
    }

    /// A change committed that takes the sockets in room `socketsIn` out of `room` (the store's notice): through the
    /// room's feed, in order with its emits, so they get every emit committed before the change and none after it.
    func leaveCommitted(socketsIn: String, room: String) {
        members.withLock { members in
            let leaving = (members.rooms[socketsIn] ?? [:]).keys.filter { members.rooms[room]?[$0] != nil }
            leave(Set(leaving), room: room, in: &members)
        }
    }

    /// Takes `sockets` out of `room` after the emits of the room this server was told of so far, and before any
    /// told later (a socket's own `leave` goes at once): call it after ``noticesCaughtUp()`` for a change that
    /// committed before, so that they get every emit committed before the change. A socket that joins the room
    /// again meanwhile stays.
    public func leave(_ sockets: [SocketIOSocket], from room: String) {
        members.withLock { members in
            let leaving = sockets.filter { members.rooms[room]?[$0.id] === $0 }.map(\.id)
            leave(Set(leaving), room: room, in: &members)
        }
    }

    /// Takes the sockets `ids` out of `room` through the room's feed (at once if it has none).
    private func leave(_ ids: Set<String>, room: String, in members: inout Members) {
        guard var feed = members.feeds[room] else {
            perform([.leave(ids)], room: room, in: &members)
            return
        }
        let steps = feed.feed.leave(ids)
        members.feeds[room] = feed
        perform(steps, room: room, in: &members)
    }

    /// The store's answer to a feed that opens.
    func opened(room: String, feed id: Int, at position: StreamPosition) {
        members.withLock { members in
            guard var feed = members.feeds[room], feed.id == id else { return }
            let steps = feed.feed.opened(at: position)
            members.feeds[room] = feed
            perform(steps, room: room, in: &members)
        }
    }

    /// The store's answer to a feed that reads a gap.
    func filled(room: String, feed id: Int, _ read: StreamRead) {
        members.withLock { members in
            guard var feed = members.feeds[room], feed.id == id else { return }
            let steps = feed.feed.filled(read)
            members.feeds[room] = feed
            perform(steps, room: room, in: &members)
        }
    }

    /// The store's notices may have been missed: every feed reads what it may not have delivered.
    func resyncFeeds() {
        members.withLock { members in
            for room in Array(members.feeds.keys) {
                guard var feed = members.feeds[room] else { continue }
                let steps = feed.feed.resync(top: nil)
                members.feeds[room] = feed
                perform(steps, room: room, in: &members)
            }
        }
    }

    /// Does what a feed decided, under the members lock: deliveries reach exactly the sockets in the room now.
    private func perform(_ steps: [RoomFeed.Step], room: String, in members: inout Members) {
        let withOffset = server.configuration.recovery != nil
        for step in steps {
            switch step {
            case .readPosition:
                guard let id = members.feeds[room]?.id else { continue }
                server.ask(.positions(namespace: self, feeds: [(room, id)]))
            case .readEmits(let after):
                guard let id = members.feeds[room]?.id else { continue }
                server.ask(.emits(namespace: self, room: room, after: after, feed: id))
            case .started(let position):
                for socket in (members.rooms[room] ?? [:]).values { socket.started(room, at: position) }
            case .deliver(let emits):
                let targets = Array((members.rooms[room] ?? [:]).values)
                for emit in emits {
                    for socket in targets where socket.id != emit.except {
                        socket.deliver(emit, room: room, withOffset: withOffset)
                    }
                }
            case .leave(let ids):
                for id in ids {
                    guard let socket = members.rooms[room]?[id], socket.left(room) else { continue }
                    members.rooms[room]?.removeValue(forKey: id)
                    socket.roomsChanged()
                }
                closeFeedIfUnused(room, in: &members)
            case .lost(let gap):
                logger.warning(
                    "a room's stream cannot be followed on from where its sockets are; they reconnect and reload",
                    metadata: ["socketio.room": "\(room)", "socketio.gap": "\(gap.rawValue)"])
                for socket in (members.rooms[room] ?? [:]).values { socket.dropConnection() }
            }
        }
        if var feed = members.feeds[room], feed.awaited, feed.feed.state != .opening {
            feedOpenings.resume(feed.id)
            feed.awaited = false
            members.feeds[room] = feed
        }
    }

    /// A room's latest value of `key` changed: sent to the sockets in the room here, replacing one still waiting.
    func deliverLatest(room: String, key: String, packet: String) {
        let targets = members.withLock { Array(($0.rooms[room] ?? [:]).values) }
        guard !targets.isEmpty else { return }
        let packets = [EnginePacket(.message, packet)]
        let pending = Self.pendingKey(namespace: name, room: room, key: key)
        for socket in targets { socket.connection.send(packets, latestKey: pending) }
    }

    /// Holds open the feeds of `rooms` (a restore reads what the client missed while they keep the rooms' notices);
    /// returns the feeds it began, which the caller opens with ``opened(room:feed:at:)`` once it knows where their
    /// streams stand. Release them with ``unpinFeeds(_:)``.
    func holdFeeds(_ rooms: [String]) -> [(room: String, feed: Int)] {
        members.withLock { members in
            var opening: [(room: String, feed: Int)] = []
            for room in rooms {
                if members.feeds[room] == nil {
                    let id = members.nextFeed
                    members.nextFeed += 1
                    members.feeds[room] = Feed(id: id)
                    opening.append((room, id))
                }
                members.feeds[room]?.pins += 1
            }
            return opening
        }
    }

    /// Has the store say where the streams of feeds begun by ``holdFeeds(_:)`` stand (when the caller could not).
    func openHeldFeeds(_ feeds: [(room: String, feed: Int)]) {
        if !feeds.isEmpty { server.ask(.positions(namespace: self, feeds: feeds)) }
    }

    func unpinFeeds(_ rooms: [String]) {
        members.withLock { members in
            for room in rooms {
                members.feeds[room]?.pins -= 1
                closeFeedIfUnused(room, in: &members)
            }
        }
    }

    /// Waits until the feed of `room` has opened (at once if it is not opening, or gone), at most `timeout`. Whether
    /// it is no longer opening.
    @discardableResult
    func untilOpened(_ room: String, timeout: Duration) async -> Bool {
        let ticket = members.withLock { members -> Waiters<Int>.Ticket? in
            guard var feed = members.feeds[room], feed.feed.state == .opening else { return nil }
            feed.awaited = true
            members.feeds[room] = feed
            return feedOpenings.register(feed.id)
        }
        guard let ticket else { return true }
        return await feedOpenings.wait(ticket, timeout: timeout)
    }

    /// Restores `socket` into its rooms from the client's `positions`: sends what it missed up to where each room's
    /// feed delivered (from `replay`, read from the store), then each room's `latest` values, and puts it in the
    /// rooms, all under the members lock so nothing delivered meanwhile is missed or sent twice. Returns, without
    /// restoring anything, the rooms whose feed moved past what was read (read on after the position given).
    func restore(
        _ socket: SocketIOSocket, positions: [String: StreamPosition],
        replay: [String: (emits: [StreamEmit], top: StreamPosition)], latest: [String: [String: String]]
    ) -> [String: StreamPosition] {
        let withOffset = server.configuration.recovery != nil
        return members.withLock { members in
            var short: [String: StreamPosition] = [:]
            for (room, read) in replay {
                guard let feed = members.feeds[room]?.feed else { continue }
                if SessionRestore.isPast(feed.position, read: read.top) { short[room] = read.top }
            }
            guard short.isEmpty else { return short }
            members.sockets[socket.id] = socket
            if let pid = socket.pid { members.sessions[pid] = socket }
            socket.restored(positions)
            for (room, position) in positions {
                members.rooms[room, default: [:]][socket.id] = socket
                let feedPosition = members.feeds[room]?.feed.position ?? position
                for emit in replay[room]?.emits ?? []
                where emit.except != socket.id
                    && (emit.position.epoch != feedPosition.epoch || emit.position.offset <= feedPosition.offset)
                {
                    socket.deliver(emit, room: room, withOffset: withOffset)
                }
                // A feed that delivered less than the client has (the client came from an instance further on) does
                // not send it those again: the socket's position is the later one.
                socket.started(room, at: feedPosition)
                for (key, packet) in (latest[room] ?? [:]).sorted(by: { $0.key < $1.key }) {
                    socket.connection.send(
                        [EnginePacket(.message, packet)],
                        latestKey: Self.pendingKey(namespace: name, room: room, key: key))
                }
            }
            connectedGauge.record(members.sockets.count)
            return [:]
        }
    }
}
