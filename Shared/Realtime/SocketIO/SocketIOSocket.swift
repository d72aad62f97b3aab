import Contracts
import Foundation
import Metrics
import NIOCore
import Synchronization

/// A client connected to one namespace: what handlers receive and emit to.
package final class SocketIOSocket: Sendable {
    /// The socket id sent in the CONNECT answer.
    package let id: String
    package let namespace: SocketIONamespace
    package let handshake: SocketIOHandshake
    let connection: SocketIOConnection
    /// Socket.IO's private session id, sent in the CONNECT answer when recovery is on; the client sends it back to
    /// recover.
    package let pid: String?
    /// True when the socket was restored after its client's connection dropped: it got back its id, rooms and
    /// every emit it missed, so connect handlers must not send again what it already has.
    package let recovered: Bool
    /// The realtime log's position when the socket first connected.
    let since: Int64
    /// How many times its session was restored.
    let generation: Int

    private struct State {
        var user: (any SocketIOUser)?
        /// Disconnects the socket when its credentials expire.
        var expiryTimer: Scheduled<Void>?
        var rooms: Set<String> = []
        var nextAckId = 0
        var pendingAcks: [Int: CheckedContinuation<SocketIOArguments, any Error>] = [:]
        var bucket: TokenBucket?
        var connected = true
        /// The offset of the last emit sent.
        var lastSent: Int64?
        /// Room changes are recorded for recovery once the connect handlers ran.
        var announced = false
        /// Restored on another instance: leaves without running disconnect handlers or recording its session.
        var movedAway = false
        /// The client sent DISCONNECT.
        var leaving = false
    }

    private let state: Mutex<State>

    init(
        id: String, namespace: SocketIONamespace, user: (any SocketIOUser)?, handshake: SocketIOHandshake,
        connection: SocketIOConnection, pid: String? = nil, since: Int64 = -1, generation: Int = 0,
        recovered: Bool = false
    ) {
        self.id = id
        self.namespace = namespace
        self.handshake = handshake
        self.connection = connection
        self.pid = pid
        self.since = since
        self.generation = generation
        self.recovered = recovered
        let limit = namespace.effectiveRateLimit
        self.state = Mutex(
            State(user: user, bucket: TokenBucket(eventsPerSecond: limit.eventsPerSecond, burst: limit.burst)))
    }

    /// Who connected, as the namespace's authorization hook established (nil if it has none); updated when the
    /// client refreshes its credentials.
    package var user: (any SocketIOUser)? { state.withLock { $0.user } }

    /// The Engine.IO session id of the connection.
    package var sessionId: String { connection.session.id }

    package var isConnected: Bool { state.withLock { $0.connected } }

    /// The rooms this socket is in (its own id included).
    package var rooms: Set<String> { state.withLock { $0.rooms } }

    /// Joins `room`: emits to the room reach this socket.
    package func join(_ room: String) {
        let added = state.withLock { state -> Bool in
            guard state.connected else { return false }
            return state.rooms.insert(room).inserted
        }
        if added {
            namespace.add(self, to: room)
            announceRooms()
        }
    }

    /// Leaves `room`.
    package func leave(_ room: String) {
        let removed = state.withLock { $0.rooms.remove(room) != nil }
        if removed {
            namespace.remove(self, from: room)
            announceRooms()
        }
    }

    /// Records the socket's rooms for recovery once it was announced.
    private func announceRooms() {
        guard state.withLock({ $0.announced && $0.connected }) else { return }
        namespace.server.record(self, state: .connected)
    }

    /// From now on room changes are recorded.
    func markAnnounced() { state.withLock { $0.announced = true } }

    /// An emit at `offset` was sent.
    func sent(_ offset: Int64) { state.withLock { $0.lastSent = offset } }

    var lastSent: Int64? { state.withLock { $0.lastSent } }

    /// The client reconnected on another instance: this socket goes quietly (no disconnect hooks, no session
    /// record), and its connection, which the client left, is closed.
    func moveAway() {
        state.withLock { $0.movedAway = true }
        connection.detach(self, reason: .transportClose)
        connection.session.close(.serverClose)
    }

    var movedAway: Bool { state.withLock { $0.movedAway } }

    /// The client sent DISCONNECT for this socket (it may not have been handled yet).
    func markLeaving() { state.withLock { $0.leaving = true } }

    var isLeaving: Bool { state.withLock { $0.leaving } }

    /// Emits `event` with `arguments` to this socket.
    package func emit(_ event: String, _ arguments: SocketIOArguments = SocketIOArguments()) {
        let packets = SocketIOConnection.eventPackets(
            namespace: namespace.name, event: event, arguments: arguments, ackId: nil)
        connection.send(packets)
    }

    /// Emits `event` with one payload encoded with the contracts' JSON coding.
    package func emit(_ event: String, _ payload: some Encodable) {
        do {
            emit(event, try SocketIOArguments(encoding: payload))
        } catch {
            namespace.logger.error("could not encode \(event)", metadata: ["error": "\(error)"])
        }
    }

    /// Emits `event` and waits for the client's acknowledgement.
    /// - Throws: ``SocketIOAckTimeout`` after `timeout`, or `CancellationError`.
    package func emitWithAck(_ event: String, _ arguments: SocketIOArguments, timeout: Duration) async throws
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
    package func refresh(_ credentials: SocketIOCredentials) {
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
                        ("code", .string(ErrorCode.tokenExpired.rawValue)),
                        ("message", .string("the token expired; connect again with a new token")),
                        ("expiredAt", .string(ISO8601.format(deadline))),
                    ]))
            ])
        )
        disconnect()
    }

    /// Disconnects the socket from its namespace (the client gets DISCONNECT; the connection stays).
    package func disconnect() {
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

    /// Marks the socket gone and returns the rooms it was in; pending acks fail.
    func markDisconnected() -> Set<String> {
        let (rooms, waiters) = state.withLock {
            state -> (Set<String>, [CheckedContinuation<SocketIOArguments, any Error>]) in
            guard state.connected else { return ([], []) }
            state.connected = false
            state.expiryTimer?.cancel()
            defer {
                state.expiryTimer = nil
                state.rooms.removeAll()
                state.pendingAcks.removeAll()
            }
            return (state.rooms, Array(state.pendingAcks.values))
        }
        for waiter in waiters { waiter.resume(throwing: SocketIODisconnected()) }
        return rooms
    }
}

/// The client did not acknowledge in time.
package struct SocketIOAckTimeout: Error, CustomStringConvertible {
    package var event: String
    package var description: String { "no acknowledgement for \(event) in time" }
}

/// The socket disconnected while an acknowledgement was awaited.
package struct SocketIODisconnected: Error {}
