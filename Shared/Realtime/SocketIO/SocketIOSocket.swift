import Foundation
import Metrics
import NIOCore
import Synchronization

/// A client connected to one namespace: what handlers receive and emit to.
public final class SocketIOSocket: Sendable {
    /// The socket id sent in the CONNECT answer.
    public let id: String
    /// The namespace the socket connected to; handlers emit to its rooms through it.
    public let namespace: SocketIONamespace
    /// What the client sent when it connected (its `auth`, the query and kept headers); refreshes do not change it.
    public let handshake: SocketIOHandshake
    let connection: SocketIOConnection
    /// Socket.IO's private session id, sent in the CONNECT answer when recovery is on; the client sends it back to
    /// recover.
    public let pid: String?
    /// True when the socket was restored after its client's connection dropped: it got back its id, rooms and
    /// every emit it missed, so connect handlers must not send again what it already has.
    public let recovered: Bool
    /// How many times its session was restored.
    let generation: Int

    private struct State {
        var user: (any SocketIOUser)?
        /// Disconnects the socket when its credentials expire.
        var expiryTimer: Scheduled<Void>?
        var rooms: Set<String> = []
        /// Where the socket is in each room's stream: the last emit sent to it, or where it joined; nil while the
        /// room's feed opens.
        var positions: [String: StreamPosition?] = [:]
        /// Where the client is known to be in each room without having received anything since: where the socket
        /// joined it, or where the client was when it was restored. Its session keeps these (what was sent since
        /// may not have arrived; the client's offset says what did).
        var joinedAt: [String: StreamPosition?] = [:]
        /// The recovery offset sent with each recoverable emit.
        var offsets = StreamOffsets()
        var nextAckId = 0
        var pendingAcks: [Int: CheckedContinuation<SocketIOArguments, any Error>] = [:]
        var bucket: TokenBucket?
        var connected = true
        /// Room changes are written to the session once the connect handlers ran.
        var announced = false
        /// Its rooms changed before it was announced (a restored socket's session, written by its claim, is
        /// written again only then).
        var changedBeforeAnnounced = false
        /// Restored on another instance: leaves without running disconnect handlers or writing its session.
        var movedAway = false
        /// The client sent DISCONNECT.
        var leaving = false
        /// Its session ended for good (left, or sent away): the store forgets it.
        var ended = false
        /// When its connection dropped (the session's state is then disconnected).
        var droppedAt: Date?
        /// Changes of its rooms, and how many of them the store has.
        var roomsVersion = 0
        var savedVersion = 0
        /// A write of its session is under way, and whether another must follow it.
        var saving = false
        var saveAgain = false
        var saveWaiters: [(version: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state: Mutex<State>

    init(
        id: String, namespace: SocketIONamespace, user: (any SocketIOUser)?, handshake: SocketIOHandshake,
        connection: SocketIOConnection, pid: String? = nil, generation: Int = 0, recovered: Bool = false
    ) {
        self.id = id
        self.namespace = namespace
        self.handshake = handshake
        self.connection = connection
        self.pid = pid
        self.generation = generation
        self.recovered = recovered
        let limit = namespace.effectiveRateLimit
        self.state = Mutex(
            State(user: user, bucket: TokenBucket(eventsPerSecond: limit.eventsPerSecond, burst: limit.burst)))
    }

    /// Who connected, as the namespace's authorization hook established (nil if it has none); updated when the
    /// client refreshes its credentials.
    public var user: (any SocketIOUser)? { state.withLock { $0.user } }

    /// The Engine.IO session id of the connection.
    public var sessionId: String { connection.session.id }

    /// Whether the socket is still in its namespace: false once either side disconnected it or its connection closed.
    public var isConnected: Bool { state.withLock { $0.connected } }

    /// The rooms this socket is in (its own id included).
    public var rooms: Set<String> { state.withLock { $0.rooms } }

    /// Joins `room`: emits to the room reach this socket from now on.
    public func join(_ room: String) { join(room, new: false) }

    /// Joins `room`; `new` when nothing can have been emitted to it yet (a new socket's own room), so its stream
    /// need not be looked up.
    func join(_ room: String, new: Bool) {
        let added = state.withLock { state -> Bool? in
            guard state.connected else { return nil }
            return state.rooms.insert(room).inserted
        }
        switch added {
        case true?:
            namespace.add(self, to: room, new: new)
            roomsChanged()
        case false?:
            // A leave released meanwhile took it out (its rooms no longer name the room): it joins as new.
            if !namespace.rejoined(self, room: room), !rooms.contains(room) { join(room, new: new) }
        case nil:
            break
        }
    }

    /// Leaves `room`.
    public func leave(_ room: String) {
        if left(room) {
            namespace.remove(self, from: room)
            roomsChanged()
        }
    }

    /// Takes `room` out of the socket's own rooms (the namespace's members are the caller's); whether it was in it.
    func left(_ room: String) -> Bool {
        state.withLock { state -> Bool in
            guard state.rooms.remove(room) != nil else { return false }
            state.positions.removeValue(forKey: room)
            state.joinedAt.removeValue(forKey: room)
            state.offsets.remove(room)
            return true
        }
    }

    /// The namespace put the socket in `room` at `position` (nil: the room's feed opens; ``started(_:at:)`` sets
    /// it).
    func joined(_ room: String, at position: StreamPosition?) {
        state.withLock { state in
            state.positions[room] = .some(position)
            state.joinedAt[room] = .some(position)
            if let position { state.offsets.set(position, of: room) }
        }
    }

    /// The feed of `room` opened at `position`: the socket's position there, unless it has one.
    func started(_ room: String, at position: StreamPosition) {
        state.withLock { state in
            guard state.rooms.contains(room), case .some(.none) = state.joinedAt[room] else { return }
            state.joinedAt[room] = position
            if case .some(.none) = state.positions[room] { state.positions[room] = position }
            state.offsets.set(state.positions[room].flatMap { $0 } ?? position, of: room)
        }
    }

    /// A restored socket is in its rooms at the positions its client has.
    func restored(_ positions: [String: StreamPosition]) {
        state.withLock { state in
            state.rooms = Set(positions.keys)
            state.positions = positions.mapValues { .some($0) }
            state.joinedAt = state.positions
            for (room, position) in positions { state.offsets.set(position, of: room) }
        }
    }

    /// Sends an emit of `room`'s stream, unless the socket had it (a position at or past it), with the socket's
    /// recovery offset as its last argument when `withOffset`.
    func deliver(_ emit: StreamEmit, room: String, withOffset: Bool) {
        let text = state.withLock { state -> String? in
            guard state.connected, state.rooms.contains(room) else { return nil }
            if case .some(.some(let current)) = state.positions[room], current.epoch == emit.position.epoch,
                emit.position.offset <= current.offset
            {
                return nil
            }
            state.positions[room] = emit.position
            guard withOffset else { return emit.packet }
            state.offsets.set(emit.position, of: room)
            return Self.appendingOffset(state.offsets.encoded, to: emit.packet)
        }
        guard let text else { return }
        RealtimeMetrics.emitsDelivered.increment()
        connection.send([EnginePacket(.message, text)] + emit.attachments.map { EnginePacket.binary($0) })
    }

    /// The event packet `text` (`2/nsp,["event",...]`) with `offset` as its last argument, as Socket.IO sends it.
    static func appendingOffset(_ offset: String, to text: String) -> String {
        guard text.hasSuffix("]") else { return text }
        return text.dropLast() + ",\"\(offset)\"]"
    }

    /// Whether the socket has a session the store keeps (recovery is on).
    private var isRecoverable: Bool { pid != nil && namespace.server.configuration.recovery != nil }

    /// The socket's rooms changed: its session is written again (once it was announced).
    func roomsChanged() {
        guard isRecoverable else { return }
        let save = state.withLock { state -> Bool in
            guard state.announced else {
                state.changedBeforeAnnounced = true
                return false
            }
            guard state.connected else { return false }
            state.roomsVersion += 1
            return true
        }
        if save { requestSave() }
    }

    /// The connect handlers ran: the session is written, and from now on each change of its rooms.
    func markAnnounced() {
        let save = state.withLock { state -> Bool in
            guard !state.announced else { return false }
            state.announced = true
            guard isRecoverable, !recovered || state.changedBeforeAnnounced else { return false }
            state.roomsVersion += 1
            return true
        }
        if save { requestSave() }
    }

    /// Asks the server to write the session, unless a write is under way (which then writes again).
    private func requestSave() {
        guard isRecoverable else { return }
        let start = state.withLock { state -> Bool in
            if state.saving {
                state.saveAgain = true
                return false
            }
            state.saving = true
            return true
        }
        if start { namespace.server.ask(.save(self)) }
    }

    /// Whether a change of its rooms is not in the store yet.
    var hasUnsavedRooms: Bool { state.withLock { $0.savedVersion < $0.roomsVersion } }

    /// Waits until the store has every change of the socket's rooms made so far, at most `timeout`: an event's
    /// acknowledgement waits for it, so a client that got the answer to its `join` recovers into that room.
    func untilRoomsSaved(timeout: Duration) async {
        let target = state.withLock { $0.roomsVersion }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let saved = self.state.withLock { state -> Bool in
                        guard state.savedVersion < target, state.connected else { return true }
                        state.saveWaiters.append((target, continuation))
                        return false
                    }
                    if saved { continuation.resume() }
                }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
            let waiting = state.withLock { state in
                defer { state.saveWaiters.removeAll { $0.version == target } }
                return state.saveWaiters.filter { $0.version == target }
            }
            for waiter in waiting { waiter.continuation.resume() }
        }
    }

    /// Writes the session to `store` as it is now, and again while it changed meanwhile (the server calls this
    /// for one write at a time). Rooms whose feed still opens are waited for.
    func save(to store: any RealtimeStore) async throws {
        guard let pid else { return }
        while true {
            let pending = state.withLock { state in state.joinedAt.filter { $0.value == nil }.map(\.key) }
            for room in pending {
                while !(await namespace.untilOpened(room, timeout: SocketIONamespace.openTimeout)) {
                    // Stopping: the session stays as last written rather than name a position not known.
                    try Task.checkCancellation()
                }
            }
            let (snapshot, version) = state.withLock { state -> (StoredSession?, Int) in
                guard !state.ended else { return (nil, state.roomsVersion) }
                var rooms: [String: StreamPosition] = [:]
                for (room, position) in state.joinedAt { rooms[room] = position ?? .start }
                let session = StoredSession(
                    pid: pid, namespace: namespace.name, sid: id, userId: state.user?.userId, rooms: rooms,
                    state: state.droppedAt == nil ? .connected : .disconnected, generation: generation,
                    owner: namespace.instanceId, changedAt: state.droppedAt ?? namespace.server.configuration.now())
                return (session, state.roomsVersion)
            }
            if let snapshot {
                try await store.save(snapshot)
            } else {
                try await store.end(pid: pid, generation: generation)
            }
            let (again, waiters) = state.withLock {
                state -> (Bool, [(version: Int, continuation: CheckedContinuation<Void, Never>)]) in
                state.savedVersion = max(state.savedVersion, version)
                let done = state.saveWaiters.filter { $0.version <= state.savedVersion }
                state.saveWaiters.removeAll { $0.version <= state.savedVersion }
                if state.saveAgain {
                    state.saveAgain = false
                    return (true, done)
                }
                state.saving = false
                return (false, done)
            }
            for waiter in waiters { waiter.continuation.resume() }
            if !again { return }
        }
    }

    /// The client reconnected on another instance: this socket goes quietly (no disconnect hooks, no session
    /// record), and its connection, which the client left, is closed.
    func moveAway() {
        state.withLock { $0.movedAway = true }
        connection.detach(self, reason: .transportClose)
        connection.session.close(.serverClose)
    }

    var movedAway: Bool { state.withLock { $0.movedAway } }

    /// Closes the socket's connection at the transport: the client reconnects (and recovers, or reloads).
    func dropConnection() { connection.session.close(.serverClose) }

    /// The client sent DISCONNECT for this socket (it may not have been handled yet).
    func markLeaving() { state.withLock { $0.leaving = true } }

    var isLeaving: Bool { state.withLock { $0.leaving } }

    /// Emits `event` with `arguments` to this socket.
    public func emit(_ event: String, _ arguments: SocketIOArguments = SocketIOArguments()) {
        let packets = SocketIOConnection.eventPackets(
            namespace: namespace.name, event: event, arguments: arguments, ackId: nil)
        connection.send(packets)
    }

    /// Emits `event` with one payload encoded with ``SocketIOConfiguration/coding``.
    public func emit(_ event: String, _ payload: some Encodable) {
        do {
            connection.send([EnginePacket(.message, try namespace.eventPacket(event, encoding: payload))])
        } catch {
            namespace.logger.error("could not encode \(event)", metadata: ["error": "\(error)"])
        }
    }

    /// Emits `event` and waits for the client's acknowledgement.
    /// - Throws: ``SocketIOAckTimeout`` after `timeout` (at once if the socket is already gone),
    ///   ``SocketIODisconnected`` if it disconnects while waiting, or `CancellationError`.
    public func emitWithAck(_ event: String, _ arguments: SocketIOArguments, timeout: Duration) async throws
        -> SocketIOArguments
    {
        let id = state.withLock { state in
            defer { state.nextAckId += 1 }
            return state.nextAckId
        }
        return try await withThrowingTaskGroup(of: SocketIOArguments.self) { group in
            group.addTask {
                try await withCheckedThrowingContinuation { continuation in
                    let accepted = self.state.withLock { state -> Bool in
                        guard state.connected else { return false }
                        state.pendingAcks[id] = continuation
                        return true
                    }
                    guard accepted else {
                        continuation.resume(throwing: SocketIOAckTimeout(event: event))
                        return
                    }
                    self.connection.send(
                        SocketIOConnection.eventPackets(
                            namespace: self.namespace.name, event: event, arguments: arguments, ackId: id)
                    )
                }
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw SocketIOAckTimeout(event: event)
            }
            defer { group.cancelAll() }
            do {
                let result = try await group.next()!
                return result
            } catch {
                let waiter = state.withLock { $0.pendingAcks.removeValue(forKey: id) }
                waiter?.resume(throwing: error)
                if error is SocketIOAckTimeout { RealtimeMetrics.ackTimeouts.increment() }
                throw error
            }
        }
    }

    /// Disconnects the socket when `deadline` passes (its token expires): it gets `token_expired`
    /// `{code: TOKEN_EXPIRED, message, expiredAt}`, then DISCONNECT (the client must connect with a new token).
    /// Replaces an earlier deadline.
    func expire(at deadline: Date) {
        let delay = Duration.milliseconds(max(0, Int64(deadline.timeIntervalSinceNow * 1000)))
        let timer = namespace.timers.scheduleTask(in: TimeAmount(delay)) { [weak self] in
            guard let self else { return }
            self.tokenExpired(deadline)
        }
        let previous = state.withLock { state -> Scheduled<Void>?? in
            guard state.connected else { return .none }
            defer { state.expiryTimer = timer }
            return .some(state.expiryTimer)
        }
        switch previous {
        case .none: timer.cancel()
        case .some(let earlier): earlier?.cancel()
        }
    }

    /// New credentials (a refreshed token): the user and the deadline they carry.
    public func refresh(_ credentials: SocketIOCredentials) {
        state.withLock { $0.user = credentials.user }
        if let expiresAt = credentials.expiresAt {
            expire(at: expiresAt)
        } else {
            state.withLock { $0.expiryTimer }?.cancel()
        }
    }

    private func tokenExpired(_ deadline: Date) {
        guard isConnected else { return }
        RealtimeMetrics.tokenExpiries.increment()
        emit(
            SocketIONamespace.tokenExpiredEvent,
            SocketIOArguments([
                .object(
                    JSONObject([
                        ("code", .string(SocketIOErrorCode.tokenExpired.rawValue)),
                        ("message", .string("the token expired; connect again with a new token")),
                        (
                            "expiredAt",
                            (try? JSONValue(encoding: deadline, with: namespace.server.configuration.coding)) ?? .null
                        ),
                    ]))
            ])
        )
        disconnect()
    }

    /// Disconnects the socket from its namespace (the client gets DISCONNECT; the connection stays).
    public func disconnect() {
        connection.send([EnginePacket(.message, SocketIOPacket(type: .disconnect, namespace: namespace.name).encoded)])
        connection.detach(self, reason: .serverNamespaceDisconnect)
    }

    // MARK: Internal

    func sendAck(id: Int, arguments: SocketIOArguments) {
        let binary = !arguments.attachments.isEmpty
        let packet = SocketIOPacket(
            type: binary ? .binaryAck : .ack, namespace: namespace.name, ackId: id, data: .array(arguments.values),
            attachmentCount: arguments.attachments.count
        )
        connection.send(
            [EnginePacket(.message, packet.encoded)] + arguments.attachments.map { EnginePacket.binary($0) })
    }

    /// The client acknowledged one of our emits.
    func receivedAck(id: Int, arguments: SocketIOArguments) {
        let waiter = state.withLock { $0.pendingAcks.removeValue(forKey: id) }
        waiter?.resume(returning: arguments)
    }

    /// Takes a token from the rate limit bucket; false if the socket is over its limit.
    func admitEvent() -> Bool {
        state.withLock { state in state.bucket?.take() ?? true }
    }

    /// Marks the socket gone and returns the rooms it was in; pending acks fail. Its session is written as
    /// dropped (`recoverable`: the client may come back) or ended, unless it was restored elsewhere.
    func markDisconnected(recoverable: Bool) -> Set<String> {
        let now = namespace.server.configuration.now()
        let (rooms, waiters, saveWaiters, save) = state.withLock {
            state -> (
                Set<String>, [CheckedContinuation<SocketIOArguments, any Error>],
                [(version: Int, continuation: CheckedContinuation<Void, Never>)], Bool
            ) in
            guard state.connected else { return ([], [], [], false) }
            state.connected = false
            state.expiryTimer?.cancel()
            if recoverable { state.droppedAt = now } else { state.ended = true }
            defer {
                state.expiryTimer = nil
                state.rooms.removeAll()
                state.pendingAcks.removeAll()
                state.saveWaiters.removeAll()
            }
            return (
                state.rooms, Array(state.pendingAcks.values), state.saveWaiters, state.announced && !state.movedAway
            )
        }
        for waiter in waiters { waiter.resume(throwing: SocketIODisconnected()) }
        for waiter in saveWaiters { waiter.continuation.resume() }
        if save { requestSave() }
        return rooms
    }
}

/// The client did not acknowledge in time.
public struct SocketIOAckTimeout: Error, CustomStringConvertible {
    /// The name of the event that was not acknowledged.
    public var event: String
    public var description: String { "no acknowledgement for \(event) in time" }
}

/// The socket disconnected while an acknowledgement was awaited.
public struct SocketIODisconnected: Error {}
