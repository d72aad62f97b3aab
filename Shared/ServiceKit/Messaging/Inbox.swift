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
}
