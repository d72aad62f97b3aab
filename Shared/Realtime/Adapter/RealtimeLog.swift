import Contracts
import Foundation

/// One entry of a service's realtime log: an emit to rooms, a change to a socket's recoverable session, or (with
/// neither) an instance's start marker. Every instance applies the same log in the same order, so a record's
/// position in it is the offset every client sees for that emit, whichever instance holds its socket.
package struct RealtimeRecord: Codable, Sendable, Equatable {
    /// The instance that wrote it.
    package var origin: String
    package var namespace: String
    /// When the origin wrote it: recovery keeps emits for its window.
    package var at: Date
    package var broadcast: RealtimeBroadcast?
    package var session: RecoverableSession?

    package init(
        origin: String, namespace: String, at: Date, broadcast: RealtimeBroadcast? = nil,
        session: RecoverableSession? = nil
    ) {
        self.origin = origin
        self.namespace = namespace
        self.at = at
        self.broadcast = broadcast
        self.session = session
    }
}

/// An emit to rooms of a namespace.
package struct RealtimeBroadcast: Codable, Sendable, Equatable {
    package var rooms: [String]
    /// Socket ids left out.
    package var except: [String]
    /// The encoded Socket.IO packet.
    package var packet: String
    /// Its binary attachments, base64.
    package var attachments: [String]
    /// Set for emits of which only the latest matters (a position): a pending one with the same key is replaced,
    /// and recovery replays only the latest.
    package var latestKey: String?
    /// Set when several instances emit the same thing (each consumed the same event): only the first record with
    /// the key is delivered.
    package var dedupeKey: String?

    package init(
        rooms: [String], except: [String] = [], packet: String, attachments: [String] = [], latestKey: String? = nil,
        dedupeKey: String? = nil
    ) {
        self.rooms = rooms
        self.except = except
        self.packet = packet
        self.attachments = attachments
        self.latestKey = latestKey
        self.dedupeKey = dedupeKey
    }
}

/// What a socket needs to be restored on any instance after its connection dropped: Socket.IO's private session
/// id, its socket id, its user and rooms, and where it stands in the log.
package struct RecoverableSession: Codable, Sendable, Equatable {
    package enum State: String, Codable, Sendable {
        /// Connected to the record's origin.
        case connected
        /// Its connection dropped for a reason the client recovers from (transport closed, ping timeout, server
        /// shutting down).
        case disconnected
        /// Left for good: the client or the server disconnected it, or it was restored.
        case ended
    }

    /// The private session id (`pid`) the client sends back to recover.
    package var pid: String
    /// The socket id, kept when restored.
    package var sid: String
    package var userId: String?
    package var rooms: [String]
    package var state: State
    /// The log's position when the socket connected: a client that received no offset missed what follows it.
    package var since: Int64
    /// The offset of the last emit sent to the socket before it disconnected.
    package var lastSent: Int64?
    /// The log's position when it disconnected.
    package var disconnectedAt: Int64?
    /// How many times it was restored: a record of an older generation changes nothing.
    package var generation: Int = 0

    package init(
        pid: String, sid: String, userId: String?, rooms: [String], state: State, since: Int64, lastSent: Int64? = nil,
        disconnectedAt: Int64? = nil, generation: Int = 0
    ) {
        self.pid = pid
        self.sid = sid
        self.userId = userId
        self.rooms = rooms
        self.state = state
        self.since = since
        self.lastSent = lastSent
        self.disconnectedAt = disconnectedAt
        self.generation = generation
    }
}

/// The log every instance of a service writes its emits and sessions to and applies in order: the broker in
/// production (``KafkaRealtimeLog``), so an emit reaches sockets held by any instance and a phone recovers on
/// whichever instance it reconnects to.
package protocol RealtimeLog: Sendable {
    /// Appends `records` in order; returns once the log holds them.
    func append(_ records: [RealtimeRecord]) async throws
    /// Applies every record the log still holds, oldest first, then each new one, with its position, until
    /// cancelled.
    func run(apply: @escaping @Sendable (Int64, RealtimeRecord) async -> Void) async throws
}
