import Foundation

/// How long and how much a server keeps for connection state recovery.
public struct SocketIORecoverySettings: Sendable {
    /// How long after its connection dropped a client may still recover (Socket.IO's `maxDisconnectionDuration`).
    public var window: Duration = .seconds(120)
    /// The most bytes of missed emits a restore sends; a client that missed more connects afresh (more would
    /// overflow its outbound queue, ``EngineConfiguration/outboundBacklogLimit``, and close it again).
    public var replayLimit = 768 << 10
    /// How often a server tells the store it still holds its connected sessions: a connected session not heard of
    /// for longer than this and the window belongs to a server that stopped.
    public var sessionRefresh: Duration = .seconds(60)

    /// The defaults: a 120-second window, a 768 KiB replay limit and a session refresh every 60 seconds.
    public init() {}

    /// How long the store keeps emits and ended sessions: the window, the refresh, and a minute for a packet that
    /// was in flight when a connection dropped.
    public var retention: Duration { window + sessionRefresh + .seconds(60) }
}

/// Why a session was not restored (the client then connects afresh and reloads).
enum RecoveryRefusal: String, Error, Sendable {
    /// No such session in this namespace (never seen, ended, or forgotten).
    case unknownSession = "unknown session"
    case anotherUser = "another user"
    /// It dropped longer ago than the window (or its server stopped longer ago than that).
    case windowPassed = "window passed"
    /// The client's offset names a room's stream the store no longer has (it began the stream again).
    case anotherEpoch = "another epoch"
    /// An emit it may have missed is no longer held.
    case emitsNoLongerHeld = "missed emits no longer held"
    /// It missed more than a restore sends (``SocketIORecoverySettings/replayLimit``).
    case tooMuchMissed = "too much missed"
    /// The offset cannot be read against the session's rooms (two of them share a hash).
    case ambiguousOffset = "ambiguous offset"
    /// Another server restored it first.
    case claimedElsewhere = "claimed elsewhere"

    init(_ gap: StreamGap) {
        switch gap {
        case .anotherEpoch: self = .anotherEpoch
        case .noLongerHeld: self = .emitsNoLongerHeld
        }
    }
}

/// The decisions of a restore, pure: whether a stored session may be restored for a client, and from where in
/// each room the client missed emits.
enum SessionRestore {
    /// Whether `session` may be restored in `namespace` for `userId` at `now`.
    static func check(
        _ session: StoredSession, namespace: String, userId: String?, now: Date, settings: SocketIORecoverySettings
    ) -> RecoveryRefusal? {
        guard session.namespace == namespace else { return .unknownSession }
        guard session.userId == userId else { return .anotherUser }
        let allowed =
            switch session.state {
            case .disconnected: settings.window
            // Its server stopped without saying so (or the connection is half-open): heard of within the refresh.
            case .connected: settings.window + settings.sessionRefresh
            }
        guard now.timeIntervalSince(session.changedAt) <= allowed.seconds else { return .windowPassed }
        return nil
    }

    /// Whether a feed at `feed` delivered past a read of its stream that stopped at `top` (or into a stream the read
    /// did not see yet: one begun since): a socket put in the room at the feed's position would miss what lies
    /// between, so the restore reads on.
    static func isPast(_ feed: StreamPosition, read top: StreamPosition) -> Bool {
        feed.epoch == top.epoch ? feed.offset > top.offset : feed.offset > 0
    }

    /// The position in each of `rooms` (rooms of `session`) the client has: what its offset says, or where the
    /// socket joined a room the offset does not name (joined after the last emit the client received, or a room
    /// nothing was emitted to since).
    static func clientPositions(
        session: StoredSession, rooms: Set<String>, offsets: StreamOffsets?
    ) -> Result<[String: StreamPosition], RecoveryRefusal> {
        var hashes: [UInt32: String] = [:]
        for room in session.rooms.keys {
            if let other = hashes.updateValue(room, forKey: StreamOffsets.hash(room)), other != room {
                return .failure(.ambiguousOffset)
            }
        }
        var positions: [String: StreamPosition] = [:]
        for room in rooms {
            guard let joined = session.rooms[room] else { continue }
            guard let received = offsets?.position(of: room) else {
                positions[room] = joined
                continue
            }
            // The offset is later than the join unless it is of the same epoch and not past it.
            positions[room] =
                received.epoch == joined.epoch && received.offset < joined.offset ? joined : received
        }
        return .success(positions)
    }
}

extension Duration {
    /// The duration in seconds.
    var seconds: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
