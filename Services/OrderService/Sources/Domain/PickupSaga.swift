import Contracts
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import ServiceKit
import ServiceLifecycle

/// The pickup saga's record as admins see it.
package struct PickupSagaView: Codable, Sendable, Equatable {
    package struct Step: Codable, Sendable, Equatable {
        package var done: Bool
        package var at: Date?
        package var failure: String?
    }

    package struct Steps: Codable, Sendable, Equatable {
        package var trackingStarted: Step
        package var customerNotified: Step
        package var vendorUpdated: Step
    }

    /// Where a saga is: every step reported (`completed`), a step cannot succeed (`failed`), or neither yet.
    package enum Status: String, Codable, Sendable {
        case inProgress = "in_progress"
        case completed
        case failed
    }

    package var orderId: String
    package var pickupEventId: String
    package var notificationId: String
    package var startedAt: Date
    package var status: Status
    package var completed: Bool
    package var completedAt: Date?
    package var failedAt: Date?
    /// Why the saga failed, e.g. "the customer could not be notified: no_devices".
    package var failure: String?
    package var steps: Steps
    package var republishCount: Int
    package var lastRepublishedAt: Date?
}

/// The saga's steps: which downstream effect of the pickup reported back.
package enum PickupSagaStep: String, Sendable, CaseIterable {
    case trackingStarted = "tracking_started_at"
    case customerNotified = "customer_notified_at"
    case vendorUpdated = "vendor_updated_at"
}

/// Reads and advances pickup sagas; republishes stalled steps. Step times and the step deadline come from the
/// service's clock.
package struct PickupSagas: Sendable {
    package let database: Database
    package let store: OrderStore
    package let now: Now

    package init(database: Database, store: OrderStore, now: Now) {
        self.database = database
        self.store = store
        self.now = now
    }

    package func view(of orderId: UUID, on connection: PostgresConnection) async throws -> PickupSagaView? {
        let rows = try await connection.queryWhileOpen(
            """
            SELECT order_id, pickup_event_id, notification_id, started_at, tracking_started_at, customer_notified_at,
                   customer_notification_failure, vendor_updated_at, completed_at, failed_at, failure, republish_count,
                   last_republished_at
            FROM pickup_sagas WHERE order_id = \(orderId)
            """, logger: store.logger
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

    /// Marks `step` of order `orderId`'s saga done (once); completes the saga when every step is.
    package func complete(_ step: PickupSagaStep, of orderId: UUID, on connection: PostgresConnection) async throws {
        var query = PostgresQuery(
            unsafeSQL: """
                UPDATE pickup_sagas SET \(step.rawValue) = coalesce(\(step.rawValue), $2)
                WHERE order_id = $1
                """, binds: PostgresBindings()
        )
        query.binds.append(orderId)
        query.binds.append(now())
        try await connection.queryWhileOpen(query, logger: store.logger)
        try await settle(orderId, on: connection)
    }

    /// The customer's push failed for good: recorded, and never republished (the notification service already
    /// retried). Once the other steps reported, the saga ends failed.
    package func recordNotificationFailure(of orderId: UUID, reason: String, on connection: PostgresConnection)
        async throws
    {
        try await connection.queryWhileOpen(
            "UPDATE pickup_sagas SET customer_notification_failure = \(reason) WHERE order_id = \(orderId)",
            logger: store.logger
        )
        try await settle(orderId, on: connection)
    }

    /// Ends the saga once every step reported: completed, or failed if the customer's push failed for good.
    private func settle(_ orderId: UUID, on connection: PostgresConnection) async throws {
        let now = self.now()
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
            """, logger: store.logger
        )
    }

    /// Republishes, through the outbox and with their original ids, the events whose steps have not reported back
    /// within `stepTimeout`: the pickup event (tracking, vendor) and the push request (customer). A saga already
    /// republished `maximumRepublishes` times ends failed instead, naming the steps that never reported. Returns
    /// how many sagas it republished for or failed.
    package func republishStalled(stepTimeout: Duration, maximumRepublishes: Int, limit: Int = 100) async throws -> Int
    {
        let cutoff = now() - stepTimeout
        return try await database.transaction { connection in
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
                """, logger: store.logger
            )
            var stalled: [StalledSaga] = []
            for try await (orderId, pickupEventId, tracking, vendor, customer, republishes) in rows.decode(
                (UUID, UUID, Bool, Bool, Bool, Int).self)
            {
                stalled.append(
                    StalledSaga(
                        orderId: orderId, pickupEventId: pickupEventId, trackingPending: tracking,
                        vendorPending: vendor, customerPending: customer, republishCount: republishes))
            }
            for saga in stalled {
                if saga.republishCount >= maximumRepublishes {
                    try await fail(saga, on: connection)
                } else {
                    try await republish(saga, on: connection)
                }
            }
            return stalled.count
        }
    }

    private struct StalledSaga {
        var orderId: UUID
        var pickupEventId: UUID
        var trackingPending: Bool
        var vendorPending: Bool
        var customerPending: Bool
        var republishCount: Int

        var pendingSteps: [String] {
            [
                trackingPending ? "tracking started" : nil, vendorPending ? "vendor updated" : nil,
                customerPending ? "customer notified" : nil,
            ].compactMap { $0 }
        }
    }

    private func republish(_ saga: StalledSaga, on connection: PostgresConnection) async throws {
        let orderId = saga.orderId
        if saga.trackingPending || saga.vendorPending,
            let envelope = try await store.envelope(eventId: saga.pickupEventId, on: connection)
        {
            try await store.outbox.enqueueEncoded(
                envelope, eventId: saga.pickupEventId, topic: .ordersEvents, key: orderId.uuidString.lowercased(),
                type: OrderPickedUp.eventType, on: connection, logger: store.logger
            )
        }
        if saga.customerPending {
            let order = try await store.order(orderId, on: connection)
            if let rider = order.rider {
                try await store.outbox.enqueue(
                    OrderWorkflow.pickupNotification(order: order, rider: rider), aggregateId: order.customerId,
                    on: connection, logger: store.logger
                )
            }
        }
        try await connection.queryWhileOpen(
            """
            UPDATE pickup_sagas SET republish_count = republish_count + 1, last_republished_at = \(now())
            WHERE order_id = \(orderId)
            """, logger: store.logger
        )
        store.logger.warning(
            "republished stalled pickup saga steps",
            metadata: ["order.id": "\(orderId)", "saga.pending": "\(saga.pendingSteps.joined(separator: ", "))"]
        )
    }

    private func fail(_ saga: StalledSaga, on connection: PostgresConnection) async throws {
        let failure =
            "no report after \(saga.republishCount) republishes from: " + saga.pendingSteps.joined(separator: ", ")
        try await connection.queryWhileOpen(
            "UPDATE pickup_sagas SET failed_at = \(now()), failure = \(failure) WHERE order_id = \(saga.orderId)",
            logger: store.logger
        )
        store.logger.error(
            "pickup saga failed; it is not republished again",
            metadata: ["order.id": "\(saga.orderId)", "saga.failure": "\(failure)"]
        )
    }
}

extension PickupSagaView: ResponseEncodable {}
