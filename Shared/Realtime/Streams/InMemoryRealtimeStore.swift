import Foundation
import Synchronization

/// A ``RealtimeStore`` in the process's memory, for a server that runs alone (the conformance server, tests):
/// streams, latest values and sessions live as long as the process, emits as long as the retention.
public final class InMemoryRealtimeStore: RealtimeStore {
    private struct Stream {
        var epoch: String
        var top: Int64
        /// The emits held, oldest first, each with when it was appended.
        var emits: [(emit: StreamEmit, at: Date)] = []
    }

    private struct State {
        var streams: [String: Stream] = [:]
        var latest: [String: [String: String]] = [:]
        var sessions: [String: StoredSession] = [:]
        var followers: [UUID: @Sendable ([RealtimeNotice]) -> Void] = [:]
    }

    private let state = Mutex(State())
    private let retention: Duration
    private let now: @Sendable () -> Date

    /// - Parameters:
    ///   - retention: how long emits are held.
    ///   - now: the clock they are held by.
    public init(
        retention: Duration = SocketIORecoverySettings().retention, now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.retention = retention
        self.now = now
    }

    private static func key(_ namespace: String, _ room: String) -> String { namespace + "\u{1F}" + room }

    /// A new stream's epoch: eight random letters and digits.
    static func makeEpoch() -> String {
        String((0..<8).map { _ in "0123456789abcdefghijklmnopqrstuvwxyz".randomElement()! })
    }

    /// Appends `emit` to its room's stream (a room's first gets a new epoch) or sets the room's latest value of its
    /// key, drops the stream's emits older than the retention, and hands the notice to every follower at once.
    public func append(_ emit: RoomEmit) async throws {
        let at = now()
        let oldest = at - retention.seconds
        state.withLock { state in
            let key = Self.key(emit.namespace, emit.room)
            let notice: RealtimeNotice
            if let latestKey = emit.latestKey {
                state.latest[key, default: [:]][latestKey] = emit.packet
                notice = .latest(namespace: emit.namespace, room: emit.room, key: latestKey, packet: emit.packet)
            } else {
                var stream = state.streams[key] ?? Stream(epoch: Self.makeEpoch(), top: 0)
                stream.top += 1
                let stored = StreamEmit(
                    namespace: emit.namespace, room: emit.room,
                    position: StreamPosition(epoch: stream.epoch, offset: stream.top), packet: emit.packet,
                    attachments: emit.attachments, except: emit.except)
                stream.emits.removeAll { $0.at < oldest }
                stream.emits.append((stored, at))
                state.streams[key] = stream
                notice = .emit(namespace: emit.namespace, room: emit.room, position: stored.position, packet: stored)
            }
            for follower in state.followers.values { follower([notice]) }
        }
    }

    /// Each room's last position (``StreamPosition/start`` for a room nothing was appended to).
    public func positions(namespace: String, rooms: [String]) async throws -> [String: StreamPosition] {
        state.withLock { state in
            Dictionary(
                rooms.map { room in
                    let stream = state.streams[Self.key(namespace, room)]
                    return (room, stream.map { StreamPosition(epoch: $0.epoch, offset: $0.top) } ?? .start)
                }, uniquingKeysWith: { first, _ in first })
        }
    }

    /// Hands the mark to every follower at once: changes are handed over as they are made, so none is pending.
    public func mark(_ id: String) async throws {
        state.withLock { state in
            for follower in state.followers.values { follower([.mark(id)]) }
        }
    }

    /// The emits after `position` still within the retention, up to `byteLimit` bytes (at least one); unavailable
    /// when `position` is of another epoch or some emit after it is no longer held.
    public func emits(namespace: String, room: String, after position: StreamPosition, byteLimit: Int) async throws
        -> StreamRead
    {
        let oldest = now() - retention.seconds
        return state.withLock { state in
            guard let stream = state.streams[Self.key(namespace, room)] else {
                return position.epoch == nil ? .emits([], top: .start) : .unavailable(.anotherEpoch)
            }
            let top = StreamPosition(epoch: stream.epoch, offset: stream.top)
            guard position.epoch == nil || position.epoch == stream.epoch else { return .unavailable(.anotherEpoch) }
            if position.offset >= stream.top { return .emits([], top: top) }
            let held = stream.emits.filter { $0.at >= oldest }
            guard let first = held.first, first.emit.position.offset <= position.offset + 1 else {
                return .unavailable(.noLongerHeld)
            }
            var bytes = 0
            var emits: [StreamEmit] = []
            for (emit, _) in held where emit.position.offset > position.offset {
                bytes += emit.bytes
                if bytes > byteLimit && !emits.isEmpty { break }
                emits.append(emit)
            }
            return .emits(emits, top: top)
        }
    }

    /// The room's latest values: each key's packet (empty when it has none).
    public func latest(namespace: String, room: String) async throws -> [String: String] {
        state.withLock { $0.latest[Self.key(namespace, room)] ?? [:] }
    }

    /// Each room's emits after its position, read in order of room name with `byteLimit` shared among them, with
    /// the room's last position and latest values.
    public func catchUp(namespace: String, after positions: [String: StreamPosition], byteLimit: Int) async throws
        -> [String: RoomCatchUp]
    {
        var budget = byteLimit
        var caughtUp: [String: RoomCatchUp] = [:]
        let tops = try await self.positions(namespace: namespace, rooms: Array(positions.keys))
        for (room, position) in positions.sorted(by: { $0.key < $1.key }) {
            let read = try await emits(namespace: namespace, room: room, after: position, byteLimit: max(budget, 0))
            if case .emits(let emits, _) = read { budget -= emits.reduce(0) { $0 + $1.bytes } }
            caughtUp[room] = RoomCatchUp(
                read: read, top: tops[room] ?? .start, latest: try await latest(namespace: namespace, room: room))
        }
        return caughtUp
    }

    /// Keeps `session`, unless the store holds a later generation of it.
    public func save(_ session: StoredSession) async throws {
        state.withLock { state in
            if let held = state.sessions[session.pid], held.generation > session.generation { return }
            state.sessions[session.pid] = session
        }
    }

    /// Sets `changedAt` to `now` on each of `pids` that `owner` holds connected.
    public func touch(pids: [String], owner: String, at now: Date) async throws {
        state.withLock { state in
            for pid in pids where state.sessions[pid]?.owner == owner && state.sessions[pid]?.state == .connected {
                state.sessions[pid]?.changedAt = now
            }
        }
    }

    /// Forgets session `pid` unless the one held has a later generation than `generation`.
    public func end(pid: String, generation: Int) async throws {
        state.withLock { state in
            if let held = state.sessions[pid], held.generation <= generation { state.sessions.removeValue(forKey: pid) }
        }
    }

    /// The session `pid`, or nil when the store does not hold it (never saved, or ended).
    public func session(pid: String) async throws -> StoredSession? {
        state.withLock { $0.sessions[pid] }
    }

    /// Stores `session` if the store holds the generation before it, and tells every follower if another owner held
    /// it connected; false when it holds no session `pid` or another claim of this generation came first.
    public func claim(_ session: StoredSession) async throws -> Bool {
        state.withLock { state in
            guard let held = state.sessions[session.pid], held.generation == session.generation - 1 else {
                return false
            }
            state.sessions[session.pid] = session
            guard held.state == .connected, held.owner != session.owner else { return true }
            let notice = RealtimeNotice.sessionClaimed(
                pid: session.pid, generation: session.generation, owner: session.owner)
            for follower in state.followers.values { follower([notice]) }
            return true
        }
    }

    /// Calls `ready`, then hands every notice to `receive` as its change is made, until the task is cancelled (then
    /// throws `CancellationError`); following is never lost.
    public func follow(
        ready: @escaping @Sendable () -> Void, _ receive: @escaping @Sendable ([RealtimeNotice]) -> Void
    ) async throws {
        let id = UUID()
        state.withLock { $0.followers[id] = receive }
        defer { _ = state.withLock { $0.followers.removeValue(forKey: id) } }
        ready()
        let (stop, stopped) = AsyncStream.makeStream(of: Void.self)
        await withTaskCancellationHandler {
            for await _ in stop {}
        } onCancel: {
            stopped.finish()
        }
        try Task.checkCancellation()
    }
}
