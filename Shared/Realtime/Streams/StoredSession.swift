import Foundation

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
