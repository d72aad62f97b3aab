import Foundation
import Logging
import PostgresNIO
import Realtime
import ServiceKit
import Synchronization

// Presence and what only it uses: its prepared statements, its backgrounded sockets and the `app_state` messages.

/// Which users have a live socket with their app in the foreground, on any instance: one row per socket in a table
/// of the service's own schema, `(socket_id text PRIMARY KEY, <room> text, user_id text, instance_id text, seen_at
/// timestamptz, in_background boolean)`. A room scopes presence (chat: the order's room); a namespace without rooms
/// uses ``SocketPresence/anywhere``. Every instance refreshes the rows of its connected sockets and deletes its
/// others (``refresh(instanceId:liveSocketIds:now:on:)``); the rows of an instance that stopped refreshing (it
/// crashed) count as gone after `freshness`. An app that goes to the background may keep its socket for a while:
/// it says so with the `app_state` event (``SocketIONamespace/reportAppState(to:database:)``), and its socket stops
/// counting until it is back.
package struct SocketPresence: Sendable {
    /// The room of a socket that is present in its namespace as a whole.
    package static let anywhere = ""

    private let table: String
    private let roomColumn: String
    private let enterStatement: any PreparedStatementText.Type
    private let leaveStatement: any PreparedStatementText.Type
    private let leaveOwnStatement: any PreparedStatementText.Type
    private let isPresentStatement: any PreparedStatementText.Type
    /// How long a socket counts as present without a refresh.
    package let freshness: Duration
    /// Sockets of this instance whose app said it is in the background, kept for rows written later (a chat
    /// socket reports its app state once, then joins rooms).
    private let inBackground = BackgroundedSockets()
    private let logger: Logger

    /// Presence kept in `Table` (the statements run on every join, leave and push are prepared for it).
    package init<Table: PresenceTable>(_: Table.Type, freshness: Duration, logger: Logger) {
        self.table = Table.table
        self.roomColumn = Table.roomColumn
        enterStatement = EnterPresence<Table>.self
        leaveStatement = LeavePresence<Table>.self
        leaveOwnStatement = LeaveOwnPresence<Table>.self
        isPresentStatement = IsPresent<Table>.self
        self.freshness = freshness
        self.logger = logger
    }

    /// Records that socket `socketId` of `userId` (on instance `instanceId`) is in `room` at `now`.
    package func enter(
        socketId: String, room: String, userId: String, instanceId: String, now: Date, on connection: PostgresConnection
    ) async throws {
        let bindings = PostgresBindings(socketId, room, userId, instanceId, now, inBackground.contains(socketId))
        try await connection.queryWhileOpen(enterStatement, bindings, logger: logger)
    }

    /// Records whether socket `socketId`'s app is in the background, for its row and any it gets later.
    package func setInBackground(_ background: Bool, socketId: String, on connection: PostgresConnection)
        async throws
    {
        inBackground.set(background, socketId: socketId)
        try await connection.queryWhileOpen(
            "UPDATE \(unescaped: table) SET in_background = \(background) WHERE socket_id = \(socketId)",
            logger: logger)
    }

    /// Forgets socket `socketId`'s row (it left its room); `disconnected` also forgets its app state. Given
    /// `instanceId`, only the row that instance wrote: a socket restored on another instance meanwhile (same id)
    /// keeps its own.
    package func leave(
        socketId: String, instanceId: String? = nil, disconnected: Bool = false, on connection: PostgresConnection
    ) async throws {
        if disconnected { inBackground.set(false, socketId: socketId) }
        if let instanceId {
            try await connection.queryWhileOpen(
                leaveOwnStatement, PostgresBindings(socketId, instanceId), logger: logger)
        } else {
            try await connection.queryWhileOpen(leaveStatement, PostgresBindings(socketId), logger: logger)
        }
    }

    /// Whether `userId` has a socket in `room` on any instance, seen within ``freshness`` before `now`, whose app
    /// is in the foreground (``PresenceTable/presentCondition(room:user:since:)``).
    package func isPresent(userId: String, room: String, now: Date, on connection: PostgresConnection) async throws
        -> Bool
    {
        let bindings = PostgresBindings(room, userId, now - freshness)
        return !(try await connection.queryWhileOpen(isPresentStatement, bindings, logger: logger)).isEmpty
    }

    /// Keeps the rows of instance `instanceId`'s connected sockets (`liveSocketIds`, read at `now`) fresh, deletes
    /// its rows written before `now` for sockets that are gone (a disconnect whose delete lost the race with the
    /// socket's row, or failed), and forgets every instance's rows older than ``freshness``.
    package func refresh(instanceId: String, liveSocketIds: [String], now: Date, on connection: PostgresConnection)
        async throws
    {
        try await connection.queryWhileOpen(
            """
            UPDATE \(unescaped: table) SET seen_at = \(now)
            WHERE instance_id = \(instanceId) AND socket_id = ANY(\(liveSocketIds))
            """, logger: logger)
        try await connection.queryWhileOpen(
            """
            DELETE FROM \(unescaped: table)
            WHERE instance_id = \(instanceId) AND seen_at < \(now) AND NOT (socket_id = ANY(\(liveSocketIds)))
            """, logger: logger)
        let cutoff = now - freshness
        try await connection.queryWhileOpen("DELETE FROM \(unescaped: table) WHERE seen_at < \(cutoff)", logger: logger)
    }
}

/// Records socket $1 of user $3 on instance $4 in room $2 at $5, in the background as $6 says.
enum EnterPresence<Table: PresenceTable>: PreparedStatementText {
    static var sql: String {
        """
        INSERT INTO \(Table.table) (socket_id, \(Table.roomColumn), user_id, instance_id, seen_at, in_background)
        VALUES ($1::text, $2::text, $3::text, $4::text, $5::timestamptz, $6::boolean)
        ON CONFLICT (socket_id) DO UPDATE SET \(Table.roomColumn) = excluded.\(Table.roomColumn),
            seen_at = excluded.seen_at, in_background = excluded.in_background
        """
    }
}

/// Forgets socket $1's row.
enum LeavePresence<Table: PresenceTable>: PreparedStatementText {
    static var sql: String { "DELETE FROM \(Table.table) WHERE socket_id = $1::text" }
}

/// Forgets socket $1's row if instance $2 wrote it.
enum LeaveOwnPresence<Table: PresenceTable>: PreparedStatementText {
    static var sql: String { "DELETE FROM \(Table.table) WHERE socket_id = $1::text AND instance_id = $2::text" }
}

/// A row if user $2 has a socket in room $1 seen after $3 with its app in the foreground.
enum IsPresent<Table: PresenceTable>: PreparedStatementText {
    static var sql: String {
        """
        SELECT 1 WHERE \(Table.presentCondition(room: "$1::text", user: "$2::text", since: "$3::timestamptz"))
        """
    }
}

/// Socket ids of this instance whose app is in the background.
private final class BackgroundedSockets: Sendable {
    private let ids = Mutex<Set<String>>([])

    func contains(_ socketId: String) -> Bool { ids.withLock { $0.contains(socketId) } }

    func set(_ background: Bool, socketId: String) {
        ids.withLock { ids in
            if background { ids.insert(socketId) } else { ids.remove(socketId) }
        }
    }
}

extension ServicePlatform {
    /// Refreshes `presence` for `namespace`'s sockets on this instance three times per freshness period, so their
    /// rows never expire while they are connected and rows of sockets that are gone do not outlive a period.
    package mutating func keepFresh(_ presence: SocketPresence, of namespace: SocketIONamespace, instanceId: String) {
        let database = self.database
        let now = self.now
        addPeriodicJob(every: presence.freshness / 3, failure: "could not refresh socket presence") {
            let refreshedAt = now()
            let live = namespace.sockets.map(\.id)
            try await database.withConnection {
                try await presence.refresh(instanceId: instanceId, liveSocketIds: live, now: refreshedAt, on: $0)
            }
        }
    }
}

/// `app_state` from an app: whether it went to the background or came back.
package struct AppState: Codable, Sendable {
    package enum State: String, Codable, Sendable {
        case foreground
        case background
    }

    package var state: State
}

extension SocketIONamespace {
    /// Forgets a socket's presence when it disconnects. Not when the server is shutting down: Postgres may be why
    /// it stops, and a stopped instance's rows expire after the presence's freshness anyway. A delete that fails
    /// (or loses the race with the socket's row) is undone by the instance's next refresh.
    package func forgetPresenceOnDisconnect(_ presence: SocketPresence, database: Database, logger: Logger) {
        onDisconnect { socket, reason in
            guard reason != .serverShuttingDown else { return }
            do {
                try await database.withConnection {
                    try await presence.leave(
                        socketId: socket.id, instanceId: socket.namespace.instanceId, disconnected: true, on: $0)
                }
            } catch {
                logger.warning("could not forget a socket's presence", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Handles `app_state` `{state: "background" | "foreground"}` -> `{ok: true}`: the socket counts in
    /// `presence` only while its app is in the foreground, so what it would be told live is pushed instead.
    package func reportAppState(to presence: SocketPresence, database: Database) {
        on("app_state", AppState.self) { socket, report in
            try await database.withConnection {
                try await presence.setInBackground(report.state == .background, socketId: socket.id, on: $0)
            }
            return AppStateAck()
        }
    }
}

/// The acknowledgement of `app_state`.
package struct AppStateAck: Codable, Sendable { package var ok = true }
