import Foundation
import Logging
import PostgresNIO

/// Consumer-side deduplication: an event id is claimed once per consumer, in the same transaction as the effect,
/// so a redelivered event (at-least-once Kafka) has its effect once.
package enum Inbox {
    /// Records that `consumer` processes `eventId`; false if it already did.
    package static func claim(
        eventId: UUID, eventType: String, consumer: String, on connection: PostgresConnection, logger: Logger
    ) async throws -> Bool {
        let rows = try await connection.queryWhileOpen(
            """
            INSERT INTO inbox (consumer, event_id, event_type) VALUES (\(consumer), \(eventId), \(eventType))
            ON CONFLICT DO NOTHING RETURNING 1
            """, logger: logger
        )
        for try await _ in rows { return true }
        return false
    }

    /// Records that `consumer` processes these events (id and type) in one statement; the ids it had not yet.
    package static func claim(
        _ events: [(id: UUID, type: String)], consumer: String, on connection: PostgresConnection, logger: Logger
    ) async throws -> Set<UUID> {
        if events.count == 1, let event = events.first {
            let claimed = try await claim(
                eventId: event.id, eventType: event.type, consumer: consumer, on: connection, logger: logger)
            return claimed ? [event.id] : []
        }
        let rows = try await connection.queryWhileOpen(
            """
            INSERT INTO inbox (consumer, event_id, event_type)
            SELECT \(consumer), id, type FROM unnest(\(events.map(\.id))::uuid[], \(events.map(\.type))::text[]) AS e(id, type)
            ON CONFLICT DO NOTHING RETURNING event_id
            """, logger: logger
        )
        var claimed = Set<UUID>()
        for try await id in rows.decode(UUID.self) { claimed.insert(id) }
        return claimed
    }
}
