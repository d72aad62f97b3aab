import Foundation

/// A socket's session as the store keeps it for recovery on any server: Socket.IO's private session id, the
/// socket, its user, its rooms with the position each was joined at, and who holds it.
public struct StoredSession: Sendable, Equatable {
    /// Whether the socket is connected (to ``owner``) or dropped and waiting for its client to recover it.
    public enum State: String, Sendable {
        /// Connected to ``owner``.
        case connected
        /// Its connection dropped for a reason the client recovers from.
        case disconnected
    }

    /// Socket.IO's private session id, sent in the CONNECT answer; the client sends it back to recover.
    public var pid: String
    /// The namespace the socket was in, e.g. `/chat`.
    public var namespace: String
    /// The socket's id, which a restored socket gets back.
    public var sid: String
    /// The ``SocketIOUser/userId`` of the socket's user, nil for a socket without one; a client restores it only as
    /// the same user (or, for nil, without one).
    public var userId: String?
    /// Each room and the position the socket was in it from when it joined (or was restored).
    public var rooms: [String: StreamPosition]
    /// Connected, or dropped; a dropped session may be restored within ``SocketIORecoverySettings/window`` of
    /// ``changedAt``.
    public var state: State
    /// How many times it was restored: a restore claims the next generation, and only one claim of a generation
    /// succeeds.
    public var generation: Int
    /// The server holding it.
    public var owner: String
    /// When its state last changed (or, connected, when its owner last said it still holds it).
    public var changedAt: Date

    /// A session as the store keeps it; servers make these, and stores hand them back as saved.
    public init(
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
