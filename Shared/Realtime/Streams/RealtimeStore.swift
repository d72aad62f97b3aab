import Foundation

/// Where a Socket.IO server keeps what its instances share: each room's stream of recoverable emits (numbered per
/// room, with an epoch), each room's latest values, and the sessions of sockets that may come back. Every instance
/// follows the store's notices and delivers what concerns the rooms its own sockets are in.
///
/// The platform keeps it in each service's Postgres schema; ``InMemoryRealtimeStore`` serves one process.
public protocol RealtimeStore: Sendable {
    /// Appends `emit` in a transaction of its own: to its room's stream, or as the room's latest value of its key.
    func append(_ emit: RoomEmit) async throws

    /// Where each of `rooms` stands now (``StreamPosition/start`` for a room with no stream).
    func positions(namespace: String, rooms: [String]) async throws -> [String: StreamPosition]

    /// Sends every follower the notice ``RealtimeNotice/mark(_:)`` `id`, after the notices of every change committed
    /// so far: a server that read positions knows, once its mark comes back, that it has every notice up to them.
    func mark(_ id: String) async throws

    /// The emits of `room` after `position`, oldest first, when the store can show nothing after `position` is
    /// missing: as many as fit in `byteLimit` bytes (at least one).
    func emits(namespace: String, room: String, after position: StreamPosition, byteLimit: Int) async throws
        -> StreamRead

    /// The latest values of `room`: each key's packet.
    func latest(namespace: String, room: String) async throws -> [String: String]

    /// What a recovering client missed in each of its rooms after its position there (as ``emits(namespace:room:after:byteLimit:)``
    /// reads it, with `byteLimit` for all the rooms together), and each room's latest values: in one go.
    func catchUp(namespace: String, after positions: [String: StreamPosition], byteLimit: Int) async throws
        -> [String: RoomCatchUp]

    /// Writes `session`, unless the store holds a later generation of it.
    func save(_ session: StoredSession) async throws

    /// Says that `owner` still holds the connected sessions `pids` (at `now`).
    func touch(pids: [String], owner: String, at now: Date) async throws

    /// Forgets session `pid` unless a later generation than `generation` was claimed.
    func end(pid: String, generation: Int) async throws

    /// The session `pid`, if the store holds it.
    func session(pid: String) async throws -> StoredSession?

    /// Claims `session` (whose generation is the next one) for its owner: true for the one claim of that
    /// generation that succeeds. Where another owner stored the session connected, the claim tells every server
    /// (``RealtimeNotice/sessionClaimed(pid:generation:owner:)``): the one holding an older generation lets its socket
    /// go. A session stored disconnected has no socket left to let go, and the claim tells nobody.
    func claim(_ session: StoredSession) async throws -> Bool

    /// Hands over the store's notices in the order their changes committed, until cancelled. Calls `ready` once
    /// following started (every change committed after that is handed over); throws when following is lost (the
    /// server then reads what it may have missed and follows again).
    func follow(ready: @escaping @Sendable () -> Void, _ receive: @escaping @Sendable ([RealtimeNotice]) -> Void)
        async throws
}
