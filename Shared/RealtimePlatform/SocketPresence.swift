import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// Which users have a live socket, on any instance: one row per socket in a table of the service's own schema,
/// `(socket_id text PRIMARY KEY, room text, user_id text, instance_id text, seen_at timestamptz)`. Every instance
/// refreshes its own rows (``refresh(instanceId:now:on:)``); the rows of an instance that stopped refreshing (it
/// crashed) count as gone after `freshness`. A room scopes presence (chat: the order's room); a namespace without
/// rooms uses ``SocketPresence/anywhere``.
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

    /// Forgets socket `socketId`.
    package func leave(socketId: String, on connection: PostgresConnection) async throws {
        try await connection.query("DELETE FROM \(unescaped: table) WHERE socket_id = \(socketId)", logger: logger)
    }

    /// Whether `userId` has a socket in `room` on any instance, seen within ``freshness`` before `now`.
    package func isPresent(userId: String, room: String, now: Date, on connection: PostgresConnection) async throws
        -> Bool
    {
        let cutoff = now - freshness
        let rows = try await connection.query(
            """
            SELECT 1 FROM \(unescaped: table) WHERE room = \(room) AND user_id = \(userId) AND seen_at > \(cutoff) LIMIT 1
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
