import Foundation

/// Where a room's stream stands: its epoch (a new one whenever the store began the stream again, so a reset store
/// is never taken for continuity) and the offset of its last emit. A room nothing was emitted to has no epoch and
/// offset 0.
package struct StreamPosition: Sendable, Hashable, CustomStringConvertible {
    package var epoch: String?
    package var offset: Int64

    package init(epoch: String?, offset: Int64) {
        self.epoch = epoch
        self.offset = offset
    }

    /// The position of a room with no stream yet.
    package static let start = StreamPosition(epoch: nil, offset: 0)

    package var description: String { "\(epoch ?? "-"):\(offset)" }
}

/// An emit to one room of a namespace, as a server hands it to its store.
package struct RoomEmit: Sendable, Equatable {
    package var namespace: String
    package var room: String
    /// The Socket.IO event packet, encoded, without a recovery offset.
    package var packet: String
    package var attachments: [[UInt8]]
    /// The socket that does not get it (the sender's own).
    package var except: String?
    /// Set when only the latest emit of this key in the room matters (a position, an ETA): it replaces the room's
    /// previous value of the key instead of joining the room's stream, carries no offset, and a recovered socket
    /// gets the latest value again.
    package var latestKey: String?

    package init(
        namespace: String, room: String, packet: String, attachments: [[UInt8]] = [], except: String? = nil,
        latestKey: String? = nil
    ) {
        self.namespace = namespace
        self.room = room
        self.packet = packet
        self.attachments = attachments
        self.except = except
        self.latestKey = latestKey
    }
}

/// An emit of a room's stream, with its place in it.
package struct StreamEmit: Sendable, Equatable {
    package var namespace: String
    package var room: String
    /// The stream's epoch and this emit's offset in it.
    package var position: StreamPosition
    package var packet: String
    package var attachments: [[UInt8]]
    package var except: String?

    package init(
        namespace: String, room: String, position: StreamPosition, packet: String, attachments: [[UInt8]] = [],
        except: String? = nil
    ) {
        self.namespace = namespace
        self.room = room
        self.position = position
        self.packet = packet
        self.attachments = attachments
        self.except = except
    }

    /// What the packets cost to hold and send, in bytes.
    package var bytes: Int { packet.utf8.count + attachments.reduce(0) { $0 + $1.count } }
}

/// What a store tells every server as it commits.
package enum RealtimeNotice: Sendable, Equatable {
    /// An emit joined its room's stream. Without its packet when that was too large to come along
    /// (``RealtimeStore/emits(namespace:room:after:byteLimit:)`` reads it).
    case emit(namespace: String, room: String, position: StreamPosition, packet: StreamEmit?)
    /// A room's latest value of a key changed.
    case latest(namespace: String, room: String, key: String, packet: String)
    /// A session was restored by `owner` (another server's socket of it must go).
    case sessionClaimed(pid: String, generation: Int, owner: String)
    /// A server's mark (``RealtimeStore/mark(_:)``): every notice of a change committed before it was sent came
    /// first.
    case mark(String)
}

/// What a store holds of a room's stream after a position.
package enum StreamRead: Sendable, Equatable {
    /// The emits after the position, in order (all of them up to `top`, the stream's position when it was read,
    /// unless they came to more than the byte limit).
    case emits([StreamEmit], top: StreamPosition)
    /// Continuity cannot be shown: the stream has another epoch, or an emit after the position is no longer held.
    case unavailable(StreamGap)

    /// What a read after `position` of a stream standing at `top` (nil: the room has no stream) takes: decided
    /// without its emits, or the emits after an offset, given to ``found(_:after:top:byteLimit:)``.
    package static func plan(after position: StreamPosition, top: StreamPosition?) -> StreamReadPlan {
        guard let top else {
            return .decided(position.epoch == nil ? .emits([], top: .start) : .unavailable(.anotherEpoch))
        }
        guard position.epoch == nil || position.epoch == top.epoch else { return .decided(.unavailable(.anotherEpoch)) }
        let after = position.epoch == nil ? 0 : position.offset
        return after >= top.offset ? .decided(.emits([], top: top)) : .readAfter(after, top: top)
    }

    /// The read of the emits `found` after offset `after` up to `top`, in order: unavailable unless they begin right
    /// after it; past `byteLimit` bytes it stops (one emit at least), short of the top.
    package static func found(_ found: [StreamEmit], after: Int64, top: StreamPosition, byteLimit: Int) -> StreamRead {
        guard found.first?.position.offset == after + 1 else { return .unavailable(.noLongerHeld) }
        var bytes = 0
        var emits: [StreamEmit] = []
        for emit in found {
            bytes += emit.bytes
            if bytes > byteLimit && !emits.isEmpty { break }
            emits.append(emit)
        }
        return .emits(emits, top: top)
    }
}

/// What a stream read takes (``StreamRead/plan(after:top:)``).
package enum StreamReadPlan: Sendable, Equatable {
    /// Decided without reading an emit.
    case decided(StreamRead)
    /// The emits after this offset, up to `top`.
    case readAfter(Int64, top: StreamPosition)
}

/// What a recovering client missed of one room: its stream after the client's position, where the stream stood
/// when read, and the room's latest values.
package struct RoomCatchUp: Sendable, Equatable {
    package var read: StreamRead
    package var top: StreamPosition
    package var latest: [String: String]

    package init(read: StreamRead, top: StreamPosition, latest: [String: String]) {
        self.read = read
        self.top = top
        self.latest = latest
    }
}

/// Why a stream read cannot continue from a position.
package enum StreamGap: String, Sendable, Equatable {
    case anotherEpoch = "another epoch"
    case noLongerHeld = "emits no longer held"
}

/// A socket's session as the store keeps it for recovery on any server: Socket.IO's private session id, the
/// socket, its user, its rooms with the position each was joined at, and who holds it.
package struct StoredSession: Sendable, Equatable {
    package enum State: String, Sendable {
        /// Connected to ``owner``.
        case connected
        /// Its connection dropped for a reason the client recovers from.
        case disconnected
    }

    package var pid: String
    package var namespace: String
    package var sid: String
    package var userId: String?
    /// Each room and the position the socket was in it from when it joined (or was restored).
    package var rooms: [String: StreamPosition]
    package var state: State
    /// How many times it was restored: a restore claims the next generation, and only one claim of a generation
    /// succeeds.
    package var generation: Int
    /// The server holding it.
    package var owner: String
    /// When its state last changed (or, connected, when its owner last said it still holds it).
    package var changedAt: Date

    package init(
        pid: String, namespace: String, sid: String, userId: String?, rooms: [String: StreamPosition], state: State,
        generation: Int, owner: String, changedAt: Date
    ) {
        self.pid = pid
        self.namespace = namespace
        self.sid = sid
        self.userId = userId
        self.rooms = rooms
        self.state = state
        self.generation = generation
        self.owner = owner
        self.changedAt = changedAt
    }
}

/// Where a Socket.IO server keeps what its instances share: each room's stream of recoverable emits (numbered per
/// room, with an epoch), each room's latest values, and the sessions of sockets that may come back. Every instance
/// follows the store's notices and delivers what concerns the rooms its own sockets are in.
///
/// The platform keeps it in each service's Postgres schema; ``InMemoryRealtimeStore`` serves one process.
package protocol RealtimeStore: Sendable {
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
    /// generation that succeeds, which tells every server (``RealtimeNotice/sessionClaimed(pid:generation:owner:)``):
    /// the one holding an older generation lets its socket go.
    func claim(_ session: StoredSession) async throws -> Bool

    /// Hands over the store's notices in the order their changes committed, until cancelled. Calls `ready` once
    /// following started (every change committed after that is handed over); throws when following is lost (the
    /// server then reads what it may have missed and follows again).
    func follow(ready: @escaping @Sendable () -> Void, _ receive: @escaping @Sendable ([RealtimeNotice]) -> Void)
        async throws
}
