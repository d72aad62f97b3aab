import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// The pickup saga's SQL, on `pickup_sagas`. Every method runs on the caller's connection, in its transaction;
/// times come from the caller (the service's clock). No decisions here (those are ``PickupSagas``'s).
package struct PickupSagaStore: Sendable {
    package let logger: Logger

    package init(logger: Logger) { self.logger = logger }

    /// A saga with a step not reported back in time, locked for the rest of the transaction.
    package struct Stalled: Sendable {
        package var orderId: UUID
        package var pickupEventId: UUID
        package var trackingPending: Bool
        package var vendorPending: Bool
        package var customerPending: Bool
        package var republishCount: Int
    }

    /// Order `orderId`'s saga, nil if it has none.
    package func view(of orderId: UUID, on connection: PostgresConnection) async throws -> PickupSagaView? {
        let rows = try await connection.queryWhileOpen(
            """
            SELECT order_id, pickup_event_id, notification_id, started_at, tracking_started_at, customer_notified_at,
                   customer_notification_failure, vendor_updated_at, completed_at, failed_at, failure, republish_count,
                   last_republished_at
            FROM pickup_sagas WHERE order_id = \(orderId)
            """, logger: logger
        )
        for try await row in rows {
            let cells = row.makeRandomAccess()
            let tracking = try cells["tracking_started_at"].decode(Date?.self)
            let notified = try cells["customer_notified_at"].decode(Date?.self)
            let vendor = try cells["vendor_updated_at"].decode(Date?.self)
            let completedAt = try cells["completed_at"].decode(Date?.self)
            let failedAt = try cells["failed_at"].decode(Date?.self)
            return PickupSagaView(
                orderId: try cells["order_id"].decode(UUID.self).uuidString.lowercased(),
                pickupEventId: try cells["pickup_event_id"].decode(UUID.self).uuidString.lowercased(),
                notificationId: try cells["notification_id"].decode(String.self),
                startedAt: try cells["started_at"].decode(Date.self),
                status: completedAt != nil ? .completed : failedAt != nil ? .failed : .inProgress,
                completed: completedAt != nil, completedAt: completedAt, failedAt: failedAt,
                failure: try cells["failure"].decode(String?.self),
                steps: .init(
                    trackingStarted: .init(done: tracking != nil, at: tracking, failure: nil),
                    customerNotified: .init(
                        done: notified != nil, at: notified,
                        failure: try cells["customer_notification_failure"].decode(String?.self)
                    ),
                    vendorUpdated: .init(done: vendor != nil, at: vendor, failure: nil)
                ),
                republishCount: try cells["republish_count"].decode(Int.self),
                lastRepublishedAt: try cells["last_republished_at"].decode(Date?.self)
            )
        }
        return nil
    }

    /// Marks `step` of order `orderId`'s saga done at `at`, unless it already was.
    package func markDone(_ step: PickupSagaStep, of orderId: UUID, at: Date, on connection: PostgresConnection)
        async throws
    {
        var query = PostgresQuery(
            unsafeSQL: """
                UPDATE pickup_sagas SET \(step.rawValue) = coalesce(\(step.rawValue), $2)
                WHERE order_id = $1
                """, binds: PostgresBindings()
        )
        query.binds.append(orderId)
        query.binds.append(at)
        try await connection.queryWhileOpen(query, logger: logger)
    }

    /// Records why the customer's push of order `orderId` failed for good.
    package func recordNotificationFailure(of orderId: UUID, reason: String, on connection: PostgresConnection)
        async throws
    {
        try await connection.queryWhileOpen(
            "UPDATE pickup_sagas SET customer_notification_failure = \(reason) WHERE order_id = \(orderId)",
            logger: logger
        )
    }

    /// Ends order `orderId`'s saga at `now` if every step reported: completed, or failed if the push failed.
    package func settle(_ orderId: UUID, at now: Date, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            UPDATE pickup_sagas
            SET completed_at = CASE WHEN customer_notified_at IS NOT NULL THEN \(now) END,
                failed_at = CASE WHEN customer_notified_at IS NULL THEN \(now) END,
                failure = CASE WHEN customer_notified_at IS NULL
                    THEN 'the customer could not be notified: ' || customer_notification_failure END
            WHERE order_id = \(orderId) AND completed_at IS NULL AND failed_at IS NULL
              AND tracking_started_at IS NOT NULL AND vendor_updated_at IS NOT NULL
              AND (customer_notified_at IS NOT NULL OR customer_notification_failure IS NOT NULL)
            """, logger: logger
        )
    }

    /// Up to `limit` open sagas, oldest first, started and last republished before `cutoff` with a step pending.
    package func stalled(before cutoff: Date, limit: Int, on connection: PostgresConnection) async throws
        -> [Stalled]
    {
        let rows = try await connection.queryWhileOpen(
            """
            SELECT order_id, pickup_event_id, tracking_started_at IS NULL, vendor_updated_at IS NULL,
                   customer_notified_at IS NULL AND customer_notification_failure IS NULL, republish_count
            FROM pickup_sagas
            WHERE completed_at IS NULL AND failed_at IS NULL
              AND (tracking_started_at IS NULL OR vendor_updated_at IS NULL
                   OR (customer_notified_at IS NULL AND customer_notification_failure IS NULL))
              AND started_at < \(cutoff)
              AND (last_republished_at IS NULL OR last_republished_at < \(cutoff))
            ORDER BY started_at LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """, logger: logger
        )
        var stalled: [Stalled] = []
        for try await (orderId, pickupEventId, tracking, vendor, customer, republishes) in rows.decode(
            (UUID, UUID, Bool, Bool, Bool, Int).self)
        {
            stalled.append(
                Stalled(
                    orderId: orderId, pickupEventId: pickupEventId, trackingPending: tracking,
                    vendorPending: vendor, customerPending: customer, republishCount: republishes))
        }
        return stalled
    }

    /// Counts a republish of order `orderId`'s stalled steps, made at `at`.
    package func markRepublished(_ orderId: UUID, at: Date, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            UPDATE pickup_sagas SET republish_count = republish_count + 1, last_republished_at = \(at)
            WHERE order_id = \(orderId)
            """, logger: logger
        )
    }

    /// Ends order `orderId`'s saga failed at `at`, with why.
    package func fail(_ orderId: UUID, at: Date, failure: String, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            "UPDATE pickup_sagas SET failed_at = \(at), failure = \(failure) WHERE order_id = \(orderId)",
            logger: logger
        )
    }
}
