import Contracts
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import ServiceLifecycle
import Synchronization

/// Notifications and their deliveries in Postgres: accepting a request (deduplicated by notification id), leasing
/// a delivery for an attempt, and recording what the provider said (retry with backoff, token clean-up, dead
/// letter, PushSent / PushFailed).
package struct NotificationStore: Sendable {
    let settings: NotificationSettings
    let outbox: Outbox
    let logger: Logger

    package init(settings: NotificationSettings, outbox: Outbox, logger: Logger) {
        self.settings = settings
        self.outbox = outbox
        self.logger = logger
    }

    /// Records the request and a delivery per device of the user; returns the deliveries to attempt. A
    /// notification id seen before is skipped; a user without devices is logged as such (PushFailed no_devices).
    package func accept(_ request: PushRequested, on connection: PostgresConnection) async throws -> [Int64] {
        let data = String(decoding: try JSONEncoder().encode(request.data), as: UTF8.self)
        let inserted = try await connection.query(
            """
            INSERT INTO notifications (notification_id, user_id, kind, title, body, data, priority, collapse_key, ttl_seconds, sound,
                                       correlation_id, status)
            VALUES (\(request.notificationId), \(request.userId), \(request.kind.rawValue), \(request.title), \(request.body), \(data)::jsonb,
                    \(request.priority.rawValue), \(request.collapseKey), \(request.ttlSeconds), \(request.sound), \(request.correlationId), 'pending')
            ON CONFLICT (notification_id) DO NOTHING RETURNING notification_id
            """, logger: logger
        )
        var isNew = false
        for try await _ in inserted { isNew = true }
        guard isNew else {
            logger.info("duplicate notification skipped", metadata: ["notification.id": "\(request.notificationId)"])
            return []
        }
        let rows = try await connection.query(
            """
            INSERT INTO deliveries (notification_id, token, platform, status)
            SELECT \(request.notificationId), token, platform, 'pending' FROM devices WHERE user_id = \(request.userId)
            RETURNING id
            """, logger: logger
        )
        var ids: [Int64] = []
        for try await id in rows.decode(Int64.self) { ids.append(id) }
        if ids.isEmpty {
            try await connection.query(
                "UPDATE notifications SET status = 'no_devices' WHERE notification_id = \(request.notificationId)",
                logger: logger
            )
            try await outbox.enqueue(
                PushFailed(
                    notificationId: request.notificationId, userId: request.userId, kind: request.kind,
                    correlationId: request.correlationId,
                    reason: "no_devices", failedAt: Date()
                ),
                aggregateId: request.userId, on: connection, logger: logger
            )
            logger.info(
                "user has no devices; nothing pushed",
                metadata: ["notification.id": "\(request.notificationId)", "user.id": "\(request.userId)"])
        }
        return ids
    }

    /// A delivery leased for one attempt.
    package struct Attempt: Sendable {
        package var deliveryId: Int64
        package var token: String
        package var platform: DevicePlatform
        package var attempt: Int
        package var userId: String
        package var correlationId: String?
        package var message: PushMessage
    }

    /// Leases delivery `id` for an attempt if it is due (or its last lease ran out); nil if it is not.
    package func lease(_ id: Int64, on connection: PostgresConnection) async throws -> Attempt? {
        let leaseSeconds = settings.timeout.timeInterval * 2 + 5
        let rows = try await connection.query(
            """
            WITH leased AS (
                UPDATE deliveries SET status = 'sending', attempts = attempts + 1, leased_until = now() + make_interval(secs => \(leaseSeconds)),
                       updated_at = now()
                WHERE id = \(id) AND ((status = 'pending' AND next_attempt_at <= now()) OR (status = 'sending' AND leased_until < now()))
                RETURNING id, notification_id, token, platform, attempts
            )
            SELECT l.id, l.token, l.platform, l.attempts, n.notification_id, n.user_id, n.kind, n.title, n.body, n.data::text, n.priority,
                   n.collapse_key, n.ttl_seconds, n.sound, n.correlation_id
            FROM leased l JOIN notifications n ON n.notification_id = l.notification_id
            """, logger: logger
        )
        for try await row in rows.decode(
            (
                Int64, String, String, Int, String, String, String, String, String, String, String, String?, Int?,
                String?, String?
            ).self
        ) {
            let (
                deliveryId, token, platform, attempts, notificationId, userId, kind, title, body, data, priority,
                collapseKey, ttl, sound, correlationId
            ) = row
            let message = PushMessage(
                notificationId: notificationId, kind: PushKind(kind), title: title, body: body,
                data: pushData(fromJSON: data), priority: PushPriority(rawValue: priority) ?? .normal,
                collapseKey: collapseKey, ttlSeconds: ttl, sound: sound
            )
            return Attempt(
                deliveryId: deliveryId, token: token, platform: DevicePlatform(rawValue: platform) ?? .android,
                attempt: attempts, userId: userId,
                correlationId: correlationId, message: message
            )
        }
        return nil
    }

    /// Deliveries due for an attempt (new, retries whose time came, leases that ran out).
    package func due(limit: Int, on connection: PostgresConnection) async throws -> [Int64] {
        let rows = try await connection.query(
            """
            (SELECT id FROM deliveries WHERE status = 'pending' AND next_attempt_at <= now() ORDER BY next_attempt_at LIMIT \(limit))
            UNION ALL
            (SELECT id FROM deliveries WHERE status = 'sending' AND leased_until < now() LIMIT \(limit))
            """, logger: logger
        )
        var ids: [Int64] = []
        for try await id in rows.decode(Int64.self) { ids.append(id) }
        return ids
    }

    /// The delay before attempt `attempt + 1`: the provider's Retry-After if it gave one, else exponential backoff
    /// with jitter (half to all of the doubled delay), capped.
    package static func retryDelay(attempt: Int, retryAfter: Duration?, initial: Duration, maximum: Duration)
        -> Duration
    {
        if let retryAfter { return min(retryAfter, maximum) }
        let doubled = initial * (1 << min(attempt - 1, 20))
        return min(doubled, maximum) * Double.random(in: 0.5...1.0)
    }

    /// Records an attempt's outcome.
    package func record(_ attempt: Attempt, outcome: PushOutcome, on connection: PostgresConnection) async throws {
        let id = attempt.deliveryId
        // One outcome of a notification at a time, so the last of its devices sees the others' final states.
        try await connection.query(
            "SELECT 1 FROM notifications WHERE notification_id = \(attempt.message.notificationId) FOR UPDATE",
            logger: logger
        )
        switch outcome {
        case .sent(let status, let answer):
            try await update(id, status: "sent", providerStatus: status, answer: answer, on: connection)
            try await announceSent(attempt, on: connection)
        case .retry(let status, let answer, let after) where attempt.attempt < settings.maximumAttempts:
            let delay = Self.retryDelay(
                attempt: attempt.attempt, retryAfter: after, initial: settings.retryInitial,
                maximum: settings.retryMaximum)
            let seconds = delay.timeInterval
            try await connection.query(
                """
                UPDATE deliveries SET status = 'pending', next_attempt_at = now() + make_interval(secs => \(seconds)), leased_until = NULL,
                       provider_status = \(status), provider_answer = \(String(answer.prefix(2000))), updated_at = now()
                WHERE id = \(id)
                """, logger: logger
            )
            logger.info(
                "push will be retried",
                metadata: [
                    "delivery.id": "\(id)", "attempt": "\(attempt.attempt)",
                    "status": "\(status.map(String.init) ?? "-")",
                ])
        case .retry(let status, let answer, _):
            try await giveUp(
                attempt, status: status, answer: answer, reason: "no success after \(attempt.attempt) attempts",
                on: connection)
        case .failed(let status, let answer):
            try await giveUp(attempt, status: status, answer: answer, reason: "refused", on: connection)
        case .invalidToken(let status, let answer):
            try await update(id, status: "token_removed", providerStatus: status, answer: answer, on: connection)
            try await connection.query("DELETE FROM devices WHERE token = \(attempt.token)", logger: logger)
            logger.info(
                "removed a dead device token",
                metadata: ["delivery.id": "\(id)", "platform": "\(attempt.platform.rawValue)"])
            try await announceIfAllFailed(attempt, reason: "device token no longer valid", on: connection)
        }
    }

    private func update(
        _ id: Int64, status: String, providerStatus: Int?, answer: String, on connection: PostgresConnection
    ) async throws {
        try await connection.query(
            """
            UPDATE deliveries SET status = \(status), leased_until = NULL, provider_status = \(providerStatus),
                   provider_answer = \(String(answer.prefix(2000))), updated_at = now()
            WHERE id = \(id)
            """, logger: logger
        )
    }

    private func giveUp(
        _ attempt: Attempt, status: Int?, answer: String, reason: String, on connection: PostgresConnection
    ) async throws {
        try await update(attempt.deliveryId, status: "failed", providerStatus: status, answer: answer, on: connection)
        try await connection.query(
            """
            INSERT INTO push_dead_letters (delivery_id, notification_id, token, platform, reason)
            VALUES (\(attempt.deliveryId), \(attempt.message.notificationId), \(attempt.token), \(attempt.platform.rawValue),
                    \(reason + ": " + String(answer.prefix(500))))
            """, logger: logger
        )
        logger.warning(
            "push failed for good", metadata: ["delivery.id": "\(attempt.deliveryId)", "reason": "\(reason)"])
        try await announceIfAllFailed(attempt, reason: reason, on: connection)
    }

    /// The first device that got it makes the notification sent (PushSent, once).
    private func announceSent(_ attempt: Attempt, on connection: PostgresConnection) async throws {
        let rows = try await connection.query(
            """
            UPDATE notifications SET status = 'sent' WHERE notification_id = \(attempt.message.notificationId) AND status = 'pending'
            RETURNING (SELECT count(*) FROM deliveries WHERE notification_id = \(attempt.message.notificationId))
            """, logger: logger
        )
        for try await devices in rows.decode(Int.self) {
            try await outbox.enqueue(
                PushSent(
                    notificationId: attempt.message.notificationId, userId: attempt.userId, kind: attempt.message.kind,
                    correlationId: attempt.correlationId, deviceCount: devices, sentAt: Date()
                ),
                aggregateId: attempt.userId, on: connection, logger: logger
            )
        }
    }

    /// When no delivery of the notification is left under way and none was sent: failed (PushFailed, once).
    private func announceIfAllFailed(_ attempt: Attempt, reason: String, on connection: PostgresConnection) async throws
    {
        let notificationId = attempt.message.notificationId
        let rows = try await connection.query(
            """
            UPDATE notifications SET status = 'failed'
            WHERE notification_id = \(notificationId) AND status = 'pending'
              AND NOT EXISTS (SELECT 1 FROM deliveries WHERE notification_id = \(notificationId) AND status IN ('pending', 'sending', 'sent'))
            RETURNING notification_id
            """, logger: logger
        )
        for try await _ in rows {
            try await outbox.enqueue(
                PushFailed(
                    notificationId: notificationId, userId: attempt.userId, kind: attempt.message.kind,
                    correlationId: attempt.correlationId,
                    reason: reason, failedAt: Date()
                ),
                aggregateId: attempt.userId, on: connection, logger: logger
            )
        }
    }
}

/// Attempts deliveries with at most `concurrency` provider calls at once, so one slow call never holds up the
/// rest. Deliveries are queued by id (once each); the attempt leases the row, so two instances never send the
/// same delivery at the same time.
package final class PushDispatcher: Service {
    let store: NotificationStore
    let database: Database
    let providers: [DevicePlatform: any PushProvider]
    let concurrency: Int
    let logger: Logger
    private let queued = Mutex<Set<Int64>>([])
    private let stream: AsyncStream<Int64>
    private let continuation: AsyncStream<Int64>.Continuation

    package init(
        store: NotificationStore, database: Database, providers: [DevicePlatform: any PushProvider], concurrency: Int,
        logger: Logger
    ) {
        self.store = store
        self.database = database
        self.providers = providers
        self.concurrency = concurrency
        self.logger = logger
        (stream, continuation) = AsyncStream.makeStream(of: Int64.self)
    }

    /// Queues deliveries for an attempt (those already queued are not queued twice).
    package func enqueue(_ ids: [Int64]) {
        let fresh = queued.withLock { queued in ids.filter { queued.insert($0).inserted } }
        for id in fresh { continuation.yield(id) }
    }

    package func run() async throws {
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                var running = 0
                for await id in self.stream {
                    if running >= self.concurrency {
                        await group.next()
                        running -= 1
                    }
                    group.addTask { await self.attempt(id) }
                    running += 1
                }
            }
        }
        continuation.finish()
    }

    private func attempt(_ id: Int64) async {
        defer { _ = queued.withLock { $0.remove(id) } }
        do {
            guard let attempt = try await database.transaction({ try await store.lease(id, on: $0) }) else { return }
            guard let provider = providers[attempt.platform] else { return }
            let outcome = await provider.send(attempt.message, to: attempt.token)
            try await database.transaction { try await store.record(attempt, outcome: outcome, on: $0) }
        } catch {
            // The lease runs out and the delivery is attempted again.
            logger.warning("could not attempt a push", metadata: ["delivery.id": "\(id)", "error": "\(error)"])
        }
    }
}

/// A notification's `data` column (jsonb, read as text) as the string map it was written from.
func pushData(fromJSON text: String) -> [String: String] {
    (try? JSONDecoder().decode([String: String].self, from: Data(text.utf8))) ?? [:]
}
