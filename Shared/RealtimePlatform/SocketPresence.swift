import Foundation
import Logging
import PostgresNIO
import Realtime
import ServiceKit

/// Which users have a live socket with their app in the foreground, on any instance: one row per socket in a table
/// of the service's own schema, `(socket_id text PRIMARY KEY, room text, user_id text, instance_id text, seen_at
/// timestamptz, in_background boolean)`. Every instance refreshes its own rows (``refresh(instanceId:now:on:)``);
/// the rows of an instance that stopped refreshing (it crashed) count as gone after `freshness`. A room scopes
/// presence (chat: the order's room); a namespace without rooms uses ``SocketPresence/anywhere``. An app that
/// goes to the background may keep its socket for a while: it says so with the `app_state` event
/// (``SocketIONamespace/reportAppState(to:database:)``), and its socket stops counting until it is back.
package struct SocketPresence: Sendable {
    /// The room of a socket that is present in its namespace as a whole.
    package static let anywhere = ""

    private let table: String
    /// How long a socket counts as present without a refresh.
    package let freshness: Duration
    private let logger: Logger

    /// - Parameter table: the presence table, a constant of the service (never user input).
    package init(table: StaticString, freshness: Duration, logger: Logger) {
        self.table = "\(table)"
        self.freshness = freshness
        self.logger = logger
    }

    /// Records that socket `socketId` of `userId` (on instance `instanceId`) is in `room` at `now`.
    package func enter(
        socketId: String, room: String, userId: String, instanceId: String, now: Date, on connection: PostgresConnection
    ) async throws {
        try await connection.query(
            """
            INSERT INTO \(unescaped: table) (socket_id, room, user_id, instance_id, seen_at)
            VALUES (\(socketId), \(room), \(userId), \(instanceId), \(now))
            ON CONFLICT (socket_id) DO UPDATE SET room = excluded.room, seen_at = excluded.seen_at
            """, logger: logger
        )
    }

    /// Records whether socket `socketId`'s app is in the background.
    package func setInBackground(_ inBackground: Bool, socketId: String, on connection: PostgresConnection)
        async throws
    {
        try await connection.query(
            "UPDATE \(unescaped: table) SET in_background = \(inBackground) WHERE socket_id = \(socketId)",
            logger: logger)
    }

    /// Forgets socket `socketId`.
    package func leave(socketId: String, on connection: PostgresConnection) async throws {
        try await connection.query("DELETE FROM \(unescaped: table) WHERE socket_id = \(socketId)", logger: logger)
    }

    /// Whether `userId` has a socket in `room` on any instance, seen within ``freshness`` before `now`, whose app
    /// is in the foreground.
    package func isPresent(userId: String, room: String, now: Date, on connection: PostgresConnection) async throws
        -> Bool
    {
        let cutoff = now - freshness
        let rows = try await connection.query(
            """
            SELECT 1 FROM \(unescaped: table)
            WHERE room = \(room) AND user_id = \(userId) AND seen_at > \(cutoff) AND NOT in_background LIMIT 1
            """, logger: logger
        )
        for try await _ in rows { return true }
        return false
    }

    /// Keeps instance `instanceId`'s rows fresh and forgets those of instances that stopped refreshing.
    package func refresh(instanceId: String, now: Date, on connection: PostgresConnection) async throws {
        try await connection.query(
            "UPDATE \(unescaped: table) SET seen_at = \(now) WHERE instance_id = \(instanceId)", logger: logger)
        let cutoff = now - freshness
        try await connection.query("DELETE FROM \(unescaped: table) WHERE seen_at < \(cutoff)", logger: logger)
    }
}

extension ServicePlatform {
    /// Refreshes this instance's rows of `presence` three times per freshness period, so they never expire while
    /// the instance runs.
    package mutating func keepFresh(_ presence: SocketPresence, instanceId: String) {
        let database = self.database
        let now = self.now
        addPeriodicJob(every: presence.freshness / 3, failure: "could not refresh socket presence") {
            try await database.withConnection { try await presence.refresh(instanceId: instanceId, now: now(), on: $0) }
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
