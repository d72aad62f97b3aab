import Foundation
import Logging
import Synchronization

/// Socket.IO v5 on top of an ``EngineServer``: namespaces, connection authorization, events and
/// acknowledgements, rooms, fan-out to every instance through a ``RealtimeStore``, and connection state recovery
/// (Socket.IO v4.6) on whichever instance a client reconnects to.
///
/// An emit to a room is appended to the room's stream in the store (in the transaction of the change that causes
/// it, when the platform's emitter is used) and delivered when the store's notice comes back, by every instance
/// that holds a socket in the room: each follows only the rooms its own sockets are in (``RoomFeed``). Each
/// recoverable emit carries the receiving socket's position in each of its rooms (``StreamOffsets``), which the
/// client sends back to recover; the session itself is kept in the store, so any instance restores it, exactly one
/// when two try.
public final class SocketIOServer: EngineHandler, Sendable {
    let logger: Logger
    /// Identifies this process in the store (the owner of its sessions).
    public let instanceId: String
    private let namespaces = Mutex<[String: SocketIONamespace]>([:])
    private let connections = Mutex<[String: SocketIOConnection]>([:])
    let store: any RealtimeStore
    let configuration: SocketIOConfiguration

    /// What the feeds and sessions ask of the store, worked through by ``runStore()``.
    enum StoreWork: Sendable {
        /// Where rooms' streams stand, for feeds that open (each feed's number tells it apart from a later one).
        case positions(namespace: SocketIONamespace, feeds: [(room: String, feed: Int)])
        /// A room's emits after a position, for a feed that fills a gap.
        case emits(namespace: SocketIONamespace, room: String, after: StreamPosition, feed: Int)
        /// A socket's session to write (its rooms changed, it connected or dropped).
        case save(SocketIOSocket)
    }

    private let work: AsyncStream<StoreWork>
    private let workInput: AsyncStream<StoreWork>.Continuation

    private struct Following {
        /// Whether the store's notices are followed now.
        var active = false
        /// Whether following was lost since it began (notices may have been missed).
        var lost = false
    }

    private let following = Mutex(Following())

    /// Feeds that open, waiting for their marks (``RealtimeStore/mark(_:)``) to come back through the notices.
    private let marks = Waiters<String>()
    private let markNumbers = Atomic<Int>(0)

    /// How long a feed that opens waits for its mark to come back through the notices before it opens anyway.
    static let markTimeout = Duration.seconds(2)

    /// A caller of ``noticesCaughtUp()`` waiting for the next mark: resumed when it came back, or to send it.
    private enum MarkTurn { case caughtUp, send }

    /// Callers of ``noticesCaughtUp()`` for the next mark, and whether a mark is out: one mark at a time, each for
    /// every caller that came before it went out (2,000 sockets joining chat rooms at once sent a mark each, one
    /// after another on the LISTEN connection, while holding their rooms' locks).
    private let markRound = Mutex<(waiting: [CheckedContinuation<MarkTurn, any Error>], out: Bool)>(([], false))

    /// Whether the store's notices are followed: until then handshakes are refused (503), since nothing could be
    /// delivered to a new socket.
    public var acceptsSessions: Bool { following.withLock { $0.active } }

    /// How many bytes of a room's stream one read after a gap takes at most.
    static let fillLimit = 4 << 20

    /// A server that shares rooms and sessions with the other instances through `store`; each server gets a new
    /// random ``instanceId``.
    public init(
        configuration: SocketIOConfiguration = SocketIOConfiguration(), store: any RealtimeStore, logger: Logger
    ) {
        self.configuration = configuration
        self.store = store
        self.logger = logger
        self.instanceId = UUID().uuidString
        (work, workInput) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    }

    /// The namespace `name` (e.g. `/chat`), created on first use. Clients can connect only to created ones.
    public func namespace(_ name: String) -> SocketIONamespace {
        let name = name.hasPrefix("/") ? name : "/" + name
        return namespaces.withLock { namespaces in
            if let existing = namespaces[name] { return existing }
            let created = SocketIONamespace(name: name, server: self, logger: logger)
            namespaces[name] = created
            return created
        }
    }

    /// Every namespace's sockets on this instance.
    public var connectedSocketCount: Int {
        namespaces.withLock { Array($0.values) }.reduce(0) { $0 + $1.sockets.count }
    }

    // MARK: EngineHandler

    /// Starts the Socket.IO connection of a new Engine.IO session; it has no socket until the client connects to a
    /// namespace.
    public func opened(_ session: EngineSession) {
        let connection = SocketIOConnection(session: session, server: self)
        connections.withLock { $0[session.id] = connection }
    }

    /// Counts the message against ``SocketIOConfiguration/inboundBacklogLimit`` (over it the session is closed) and
    /// queues its packet, once complete, to be handled in order; acknowledgements resolve at once.
    /// - Throws: ``EngineProtocolError`` for a malformed packet, or one for a namespace the client has not joined.
    public func receive(_ message: EngineMessage, from session: EngineSession) throws(EngineProtocolError) {
        guard let connection = connections.withLock({ $0[session.id] }) else { return }
        try connection.receive(message)
    }

    /// Every socket of the session leaves its namespace, after the packets already received were handled.
    public func closed(_ session: EngineSession, reason: EngineCloseReason) async {
        guard let connection = connections.withLock({ $0.removeValue(forKey: session.id) }) else { return }
        await connection.closed(reason: reason)
    }

    // MARK: Packets, in order per connection

    func handle(_ item: SocketIOPacketWithAttachments, on connection: SocketIOConnection)
        async throws(EngineProtocolError)
    {
        if let (socket, reason) = item.detach {
            await socket.namespace.disconnected(socket, reason: reason)
            return
        }
        let packet = item.packet
        switch packet.type {
        case .connect:
            try await connect(packet, on: connection)
        case .disconnect:
            guard let socket = connection.socket(in: packet.namespace) else {
                throw EngineProtocolError("DISCONNECT from a namespace not joined")
            }
            connection.detach(socket, reason: .clientNamespaceDisconnect)
        case .event, .binaryEvent:
            guard let socket = connection.socket(in: packet.namespace), case .array(let values) = packet.data else {
                throw EngineProtocolError("EVENT for a namespace not joined")
            }
            let event: String =
                switch values[0] {
                case .string(let name): name
                default: values[0].serialized
                }
            let ack = packet.ackId.map { SocketIOAck(socket: socket, id: $0) }
            guard socket.admitEvent() else {
                RealtimeMetrics.rateLimited.increment()
                ack?.send(
                    SocketIOArguments([
                        SocketIOEventError(code: .rateLimited, message: "too many events; slow down").body
                    ]))
                return
            }
            guard let handler = socket.namespace.handler(for: event) else {
                logger.debug(
                    "no handler", metadata: ["socketio.event": "\(event)", "socketio.namespace": "\(packet.namespace)"])
                return
            }
            await handler(socket, SocketIOArguments(Array(values.dropFirst()), attachments: item.attachments), ack)
        case .ack, .binaryAck, .connectError:
            break
        }
    }

    private func connect(_ packet: SocketIOPacket, on connection: SocketIOConnection) async throws(EngineProtocolError)
    {
        guard let namespace = namespaces.withLock({ $0[packet.namespace] }) else {
            refuse(packet.namespace, SocketIOConnectRefusal("Invalid namespace"), on: connection)
            return
        }
        guard connection.socket(in: namespace.name) == nil else {
            throw EngineProtocolError("CONNECT twice to one namespace")
        }
        let handshake = SocketIOHandshake(
            auth: packet.data, query: connection.session.query, headers: connection.session.headers)
        var credentials: SocketIOCredentials?
        if let authorizer = namespace.authorizer {
            do {
                credentials = try await authorizer(handshake)
            } catch let refusal as SocketIOConnectRefusal {
                refuse(namespace.name, refusal, on: connection)
                return
            } catch {
                logger.error(
                    "authorization hook failed",
                    metadata: ["error": "\(error)", "socketio.namespace": "\(namespace.name)"])
                refuse(namespace.name, SocketIOConnectRefusal("internal error", code: .internalError), on: connection)
                return
            }
        }
        if let recovery = configuration.recovery, let request = RecoveryRequest(auth: packet.data) {
            switch await restore(
                request, in: namespace, handshake: handshake, user: credentials?.user, settings: recovery,
                on: connection)
            {
            case .success(let socket):
                RealtimeMetrics.recoveries.increment()
                connection.session.claim()
                await namespace.connected(socket)
                if let expiresAt = credentials?.expiresAt { socket.expire(at: expiresAt) }
                return
            case .failure(let refusal):
                RealtimeMetrics.recoveryRefused(refusal)
                logger.debug(
                    "socket not recovered",
                    metadata: ["socketio.namespace": "\(namespace.name)", "socketio.refusal": "\(refusal.rawValue)"])
            }
        }
        let pid = configuration.recovery == nil ? nil : EngineServer.makeSessionId()
        let socket = SocketIOSocket(
            id: EngineServer.makeSessionId(), namespace: namespace, user: credentials?.user, handshake: handshake,
            connection: connection, pid: pid)
        guard connection.attach(socket) else { throw EngineProtocolError("CONNECT twice to one namespace") }
        namespace.register(socket)
        connection.send([EnginePacket(.message, Self.connectAnswer(socket).encoded)])
        connection.session.claim()
        await namespace.connected(socket)
        if let expiresAt = credentials?.expiresAt { socket.expire(at: expiresAt) }
    }

    /// The CONNECT answer: the socket id, and the private session id when recovery is on.
    private static func connectAnswer(_ socket: SocketIOSocket) -> SocketIOPacket {
        var fields: [(key: String, value: JSONValue)] = [("sid", .string(socket.id))]
        if let pid = socket.pid { fields.append(("pid", .string(pid))) }
        return SocketIOPacket(type: .connect, namespace: socket.namespace.name, data: .object(JSONObject(fields)))
    }

    /// Restores the session a client asks back, if it may be: held by the store, the same user, within the window,
    /// and every emit it missed in each of its rooms still held and shown contiguous. The missed emits go out before
    /// the CONNECT answer, as Socket.IO sends them, then each room's latest values; a refusal leaves the client to
    /// connect afresh (it sees a new `pid` and reloads its state).
    private func restore(
        _ request: RecoveryRequest, in namespace: SocketIONamespace, handshake: SocketIOHandshake,
        user: (any SocketIOUser)?, settings: SocketIORecoverySettings, on connection: SocketIOConnection
    ) async -> Result<SocketIOSocket, RecoveryRefusal> {
        let stored: StoredSession
        do {
            guard let found = try await store.session(pid: request.pid) else { return .failure(.unknownSession) }
            stored = found
        } catch {
            logger.warning("could not read a session to restore", metadata: ["error": "\(error)"])
            return .failure(.unknownSession)
        }
        if let refusal = SessionRestore.check(
            stored, namespace: namespace.name, userId: user?.userId, now: configuration.now(), settings: settings)
        {
            return .failure(refusal)
        }
        let sessionRooms = Set(stored.rooms.keys)
        let allPositions: [String: StreamPosition]
        switch SessionRestore.clientPositions(session: stored, rooms: sessionRooms, offsets: request.offsets) {
        case .success(let found): allPositions = found
        case .failure(let refusal): return .failure(refusal)
        }
        // The feeds first, keeping the rooms' notices, so that what is read below meets what they deliver; the
        // feeds this began open where the same read found their streams.
        let began = namespace.holdFeeds(Array(sessionRooms))
        defer { namespace.unpinFeeds(Array(sessionRooms)) }
        // The socket's own rooms always; the others as the namespace allows (the user's access may have changed),
        // asked while what was missed is read.
        let own = Set([stored.sid] + (user.map { [SocketIONamespace.userRoom($0.userId)] } ?? []))
        async let allowed: Set<String> = {
            guard let user, let check = namespace.recoveryCheck else { return sessionRooms }
            return await check(user, stored.sid, sessionRooms.subtracting(own)).union(own)
        }()
        let caughtUp: [String: RoomCatchUp]
        do {
            caughtUp = try await store.catchUp(
                namespace: namespace.name, after: allPositions, byteLimit: settings.replayLimit)
        } catch {
            namespace.openHeldFeeds(began)
            _ = await allowed
            logger.warning("could not read what a recovering socket missed", metadata: ["error": "\(error)"])
            return .failure(.emitsNoLongerHeld)
        }
        for (room, feed) in began {
            namespace.opened(room: room, feed: feed, at: caughtUp[room]?.top ?? .start)
        }
        let rooms = (await allowed).intersection(sessionRooms)
        for room in rooms {
            guard await namespace.untilOpened(room, timeout: SocketIONamespace.openTimeout) else {
                logger.warning("a recovering socket's room could not be followed in time")
                return .failure(.emitsNoLongerHeld)
            }
        }
        let positions = allPositions.filter { rooms.contains($0.key) }
        var replay: [String: (emits: [StreamEmit], top: StreamPosition)] = [:]
        var latest: [String: [String: String]] = [:]
        var budget = settings.replayLimit
        for room in rooms {
            guard let missed = caughtUp[room] else { continue }
            switch missed.read {
            case .unavailable(let gap): return .failure(RecoveryRefusal(gap))
            case .emits(let emits, let top):
                let bytes = emits.reduce(0) { $0 + $1.bytes }
                let complete = emits.last.map { $0.position == top } ?? (top.offset <= (positions[room]?.offset ?? 0))
                guard complete, bytes <= budget else { return .failure(.tooMuchMissed) }
                replay[room] = (emits, top)
                budget -= bytes
            }
            latest[room] = missed.latest
        }
        var claimed = stored
        claimed.generation += 1
        claimed.owner = instanceId
        claimed.state = .connected
        claimed.changedAt = configuration.now()
        // Its rooms from where the client is: what the restored socket's session says (no write after it).
        claimed.rooms = positions
        do {
            guard try await store.claim(claimed) else { return .failure(.claimedElsewhere) }
        } catch {
            logger.warning("could not claim a session to restore", metadata: ["error": "\(error)"])
            return .failure(.claimedElsewhere)
        }
        let socket = SocketIOSocket(
            id: stored.sid, namespace: namespace, user: user, handshake: handshake, connection: connection,
            pid: stored.pid, generation: claimed.generation, recovered: true)
        guard connection.attach(socket) else { return .failure(.claimedElsewhere) }
        // The same client's previous socket may still be held here (its connection not yet seen dropped).
        namespace.sockets.first { $0.id == stored.sid }?.moveAway()
        while true {
            let short = namespace.restore(
                socket, positions: positions, replay: replay, latest: latest)
            if short.isEmpty { break }
            // A feed moved past what was read: read on from there.
            do {
                for (room, after) in short {
                    guard
                        case .emits(let more, let top) = try await store.emits(
                            namespace: namespace.name, room: room, after: after, byteLimit: Self.fillLimit)
                    else {
                        connection.detach(socket, reason: .transportClose)
                        return .failure(.emitsNoLongerHeld)
                    }
                    replay[room] = ((replay[room]?.emits ?? []) + more, top)
                }
            } catch {
                connection.detach(socket, reason: .transportClose)
                return .failure(.emitsNoLongerHeld)
            }
        }
        connection.send([EnginePacket(.message, Self.connectAnswer(socket).encoded)])
        return .success(socket)
    }

    private func refuse(_ namespace: String, _ refusal: SocketIOConnectRefusal, on connection: SocketIOConnection) {
        var fields: [(key: String, value: JSONValue)] = [("message", .string(refusal.message))]
        if let code = refusal.code {
            fields.append(("data", .object(JSONObject([("code", .string(code.rawValue))]))))
        }
        let packet = SocketIOPacket(type: .connectError, namespace: namespace, data: .object(JSONObject(fields)))
        connection.send([EnginePacket(.message, packet.encoded)])
    }

    // MARK: The store

    /// Hands `work` to ``runStore()``.
    func ask(_ item: StoreWork) { workInput.yield(item) }

    /// Follows the store's notices (again after losing them, reading what the feeds may have missed) and does the
    /// store work the feeds and sessions ask for, until cancelled; then writes the sessions still to be written.
    public func runStore() async {
        await withDiscardingTaskGroup { following in
            following.addTask { await self.followStore() }
            following.addTask { await self.refreshSessions() }
            // Ends once the work is finished and every piece of it done (sessions of sockets that just closed).
            await withDiscardingTaskGroup { group in
                for await item in work {
                    group.addTask { await self.perform(item) }
                }
            }
            following.cancelAll()
        }
    }

    /// No more store work: ``runStore()`` ends once what is asked is done.
    public func finishStoreWork() { workInput.finish() }

    private func followStore() async {
        while !Task.isCancelled {
            do {
                try await store.follow(ready: { self.followingStarted() }) { notices in self.received(notices) }
            } catch is CancellationError {
                return
            } catch {
                if Task.isCancelled { return }
                following.withLock {
                    $0.active = false
                    $0.lost = true
                }
                logger.warning("lost the realtime store's notices; following again", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    private func followingStarted() {
        let resync = following.withLock { following -> Bool in
            following.active = true
            defer { following.lost = false }
            return following.lost
        }
        guard resync else { return }
        logger.info("following the realtime store again; reading what the rooms held here missed")
        for namespace in namespaces.withLock({ Array($0.values) }) { namespace.resyncFeeds() }
    }

    private func received(_ notices: [RealtimeNotice]) {
        for notice in notices {
            switch notice {
            case .emit(let name, let room, let position, let packet):
                namespaces.withLock { $0[name] }?.received(
                    room: room, RoomFeed.Notice(position: position, emit: packet))
            case .latest(let name, let room, let key, let packet):
                namespaces.withLock { $0[name] }?.deliverLatest(room: room, key: key, packet: packet)
            case .mark(let id):
                marks.resume(id)
            case .leave(let name, let socketsIn, let room):
                namespaces.withLock({ $0[name] })?.leaveCommitted(socketsIn: socketsIn, room: room)
            case .sessionClaimed(let pid, let generation, let owner):
                guard owner != instanceId else { continue }
                for namespace in namespaces.withLock({ Array($0.values) }) {
                    guard let socket = namespace.socket(session: pid), socket.generation < generation else { continue }
                    socket.moveAway()
                }
            }
        }
    }

    /// Where `rooms` stand, once every notice up to there has come: the notice of an emit that committed just
    /// before the read can come after its answer (the notices travel on a connection of their own), and a feed
    /// that opened at the read's positions would take it as delivered. The mark sent after the read comes back
    /// behind every such notice, which a feed that still opens keeps.
    private func positionsWithTheirNotices(_ namespace: String, rooms: [String]) async throws
        -> [String: StreamPosition]
    {
        let positions = try await store.positions(namespace: namespace, rooms: rooms)
        try await noticesCaughtUp()
        return positions
    }

    /// Returns once this server has applied the store's notice of every change committed before the call (a
    /// mark's round trip), or after ``markTimeout`` with a warning; at once while it does not follow the store
    /// (following again, every feed reads what it may have missed).
    func noticesCaughtUp() async throws {
        guard following.withLock({ $0.active }) else { return }
        let turn = try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<MarkTurn, any Error>) in
            let sends = markRound.withLock { round -> Bool in
                if round.out {
                    round.waiting.append(continuation)
                    return false
                }
                round.out = true
                return true
            }
            if sends { continuation.resume(returning: .send) }
        }
        guard turn == .send else { return }
        // This caller sends the mark for itself and every caller waiting now; the first to come meanwhile sends
        // the next.
        var riders = markRound.withLock { round in
            defer { round.waiting = [] }
            return round.waiting
        }
        var failure: (any Error)?
        do {
            try await roundTripMark()
        } catch is CancellationError {
            // This caller was cancelled before its mark came back: the first of the others sends one for them.
            markRound.withLock { $0.waiting.insert(contentsOf: riders, at: 0) }
            riders = []
            failure = CancellationError()
        } catch {
            failure = error
        }
        for rider in riders {
            if let failure { rider.resume(throwing: failure) } else { rider.resume(returning: .caughtUp) }
        }
        let next = markRound.withLock { round -> CheckedContinuation<MarkTurn, any Error>? in
            guard !round.waiting.isEmpty else {
                round.out = false
                return nil
            }
            return round.waiting.removeFirst()
        }
        next?.resume(returning: .send)
        if let failure { throw failure }
    }

    /// Sends a mark and waits for it to come back, or for ``markTimeout`` with a warning; returns at once if the
    /// store's notices are not followed (any more). Throws `CancellationError` if cancelled before it came back.
    private func roundTripMark() async throws {
        guard following.withLock({ $0.active }) else { return }
        let id = "\(instanceId)/\(markNumbers.add(1, ordering: .relaxed).newValue)"
        let ticket = marks.register(id)
        do {
            try await store.mark(id)
        } catch {
            marks.resume(id)
            throw error
        }
        // Cancelled (the server stops), the wait ends too: its mark may never come back.
        guard await marks.wait(ticket, timeout: Self.markTimeout) else {
            try Task.checkCancellation()
            logger.warning("a mark did not come back through the store's notices; going on without it")
            return
        }
    }

    private func perform(_ item: StoreWork) async {
        var backoff = Duration.milliseconds(100)
        while !Task.isCancelled {
            do {
                switch item {
                case .positions(let namespace, let feeds):
                    let open = feeds.filter { namespace.isFeedOpen($0.room, feed: $0.feed) }
                    guard !open.isEmpty else { return }
                    let positions = try await positionsWithTheirNotices(namespace.name, rooms: open.map(\.room))
                    for (room, feed) in open {
                        namespace.opened(room: room, feed: feed, at: positions[room] ?? .start)
                    }
                case .emits(let namespace, let room, let after, let feed):
                    guard namespace.isFeedOpen(room, feed: feed) else { return }
                    let read = try await store.emits(
                        namespace: namespace.name, room: room, after: after, byteLimit: Self.fillLimit)
                    namespace.filled(room: room, feed: feed, read)
                case .save(let socket):
                    try await socket.save(to: store)
                }
                return
            } catch {
                logger.warning("realtime store work failed; trying again", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(5))
            }
        }
    }

    /// Tells the store, every ``SocketIORecoverySettings/sessionRefresh``, that this instance still holds its
    /// connected sessions (one it stops telling, because it stopped, is restorable until the window passes).
    private func refreshSessions() async {
        guard let recovery = configuration.recovery else { return }
        while !Task.isCancelled {
            try? await Task.sleep(for: recovery.sessionRefresh)
            let pids = namespaces.withLock { Array($0.values) }.flatMap { $0.sockets.compactMap(\.pid) }
            var start = 0
            while start < pids.count {
                let chunk = Array(pids[start..<min(start + 1000, pids.count)])
                do {
                    try await store.touch(pids: chunk, owner: instanceId, at: configuration.now())
                    start += chunk.count
                } catch {
                    logger.warning("could not refresh this instance's sessions", metadata: ["error": "\(error)"])
                    break
                }
            }
        }
    }
}

/// What a reconnecting client sends in its CONNECT `auth` to recover: Socket.IO's `pid` and the offset it last
/// received (none if it received no recoverable emit since it connected: a departure from Socket.IO, which then
/// cannot recover).
struct RecoveryRequest {
    var pid: String
    var offsets: StreamOffsets?

    init?(auth: JSONValue?) {
        guard let pid = auth?["pid"]?.stringValue, !pid.isEmpty, pid.utf8.count <= 64 else { return nil }
        self.pid = pid
        if let offset = auth?["offset"] {
            // As Socket.IO: an offset must be a string (ours); anything else is no recovery at all.
            guard let text = offset.stringValue, let parsed = StreamOffsets(parsing: text) else { return nil }
            self.offsets = parsed
        }
    }
}
