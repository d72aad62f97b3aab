import Contracts
import Foundation
import Logging
import PostgresNIO
import ServiceKit

extension DevicePlatform: PostgresTextEnum {}
extension PushPriority: PostgresTextEnum {}
extension NotificationStatus: PostgresTextEnum {}
extension DeliveryStatus: PostgresTextEnum {}

/// Notification's SQL: notifications, their deliveries (one per device), dead letters. Every method runs on the
/// caller's connection, in its transaction; times come from the caller (the service's clock). No decisions here
/// (those are ``DeliveryRules`` and ``DeliveryWorkflow``).
package struct NotificationStore: Sendable {
    let logger: Logger

    package init(logger: Logger) { self.logger = logger }

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

    /// Stores the requests and a pending delivery of each new one to each device of its user, due at `now`, in one
    /// statement; the notification ids not seen before (a repeated id is stored once) and the deliveries' ids, with
    /// their notification's.
    package func insert(_ requests: [PushRequested], now: Date, on connection: PostgresConnection) async throws
        -> (fresh: Set<String>, deliveries: [(id: Int64, notificationId: String)])
    {
        let document = String(decoding: try ContractCoding.encode(requests), as: UTF8.self)
        let rows = try await connection.queryWhileOpen(
            """
            WITH fresh AS (
                INSERT INTO notifications (notification_id, user_id, kind, title, body, data, priority, collapse_key,
                                           ttl_seconds, sound, correlation_id, wakes_app, status)
                SELECT r."notificationId", r."userId", r.kind, r.title, r.body, r.data, r.priority, r."collapseKey",
                       r."ttlSeconds", r.sound, r."correlationId", coalesce(r."wakesApp", false), 'pending'
                FROM jsonb_to_recordset(\(document)::jsonb) AS r(
                    "notificationId" text, "userId" text, kind text, title text, body text, data jsonb,
                    priority text, "collapseKey" text, "ttlSeconds" integer, sound text, "correlationId" text,
                    "wakesApp" boolean)
                ON CONFLICT (notification_id) DO NOTHING RETURNING notification_id, user_id
            ), added AS (
                INSERT INTO deliveries (notification_id, token, platform, status, next_attempt_at)
                SELECT f.notification_id, d.token, d.platform, 'pending', \(now)
                FROM fresh f JOIN devices d ON d.user_id = f.user_id
                RETURNING id, notification_id
            )
            SELECT f.notification_id, a.id FROM fresh f LEFT JOIN added a ON a.notification_id = f.notification_id
            """, logger: logger
        )
        var fresh = Set<String>()
        var deliveries: [(id: Int64, notificationId: String)] = []
        for try await (notificationId, deliveryId) in rows.decode((String, Int64?).self) {
            fresh.insert(notificationId)
            if let deliveryId { deliveries.append((deliveryId, notificationId)) }
        }
        return (fresh, deliveries)
    }

    /// Sets a notification's status.
    package func setStatus(_ status: NotificationStatus, notificationId: String, on connection: PostgresConnection)
        async throws
    {
        try await connection.queryWhileOpen(
            "UPDATE notifications SET status = \(status) WHERE notification_id = \(notificationId)", logger: logger)
    }

    /// Leases those of deliveries `ids` that are due at `now` (or whose last lease ran out) until `until`; their
    /// attempts, with their notification's message.
    package func lease(_ ids: [Int64], now: Date, until: Date, on connection: PostgresConnection) async throws
        -> [Attempt]
    {
        let rows = try await connection.queryWhileOpen(
            """
            WITH leased AS (
                UPDATE deliveries SET status = 'sending', attempts = attempts + 1, leased_until = \(until),
                       updated_at = now()
                WHERE id = ANY(\(ids)::bigint[]) AND ((status = 'pending' AND next_attempt_at <= \(now))
                                                     OR (status = 'sending' AND leased_until < \(now)))
                RETURNING id, notification_id, token, platform, attempts
            )
            SELECT l.id, l.token, l.platform, l.attempts, n.notification_id, n.user_id, n.kind, n.title, n.body,
                   n.data::text, n.priority, n.collapse_key, n.ttl_seconds, n.sound, n.correlation_id, n.wakes_app
            FROM leased l JOIN notifications n ON n.notification_id = l.notification_id
            ORDER BY l.id
            """, logger: logger
        )
        var attempts: [Attempt] = []
        for try await row in rows.decode(
            (
                Int64, String, DevicePlatform, Int, String, String, String, String, String, String, PushPriority,
                String?, Int?, String?, String?, Bool
            ).self
        ) {
            let message = PushMessage(
                notificationId: row.4, kind: PushKind(row.6), title: row.7, body: row.8,
                data: pushData(fromJSON: row.9),
                priority: row.10, collapseKey: row.11, ttlSeconds: row.12, sound: row.13, wakesApp: row.15
            )
            attempts.append(
                Attempt(
                    deliveryId: row.0, token: row.1, platform: row.2, attempt: row.3, userId: row.5,
                    correlationId: row.14, message: message))
        }
        return attempts
    }

    /// Deliveries due at `now` (new, retries whose time came, leases that ran out).
    package func due(now: Date, limit: Int, on connection: PostgresConnection) async throws -> [Int64] {
        let rows = try await connection.queryWhileOpen(
            """
            (SELECT id FROM deliveries WHERE status = 'pending' AND next_attempt_at <= \(now)
             ORDER BY next_attempt_at LIMIT \(limit))
            UNION ALL
            (SELECT id FROM deliveries WHERE status = 'sending' AND leased_until < \(now) LIMIT \(limit))
            """, logger: logger
        )
        var ids: [Int64] = []
        for try await id in rows.decode(Int64.self) { ids.append(id) }
        return ids
    }

    /// The earliest `next_attempt_at` of a pending delivery or `leased_until` of one being sent; nil for none.
    package func nextDue(on connection: PostgresConnection) async throws -> Date? {
        let rows = try await connection.queryWhileOpen(
            """
            SELECT least(
                (SELECT min(next_attempt_at) FROM deliveries WHERE status = 'pending'),
                (SELECT min(leased_until) FROM deliveries WHERE status = 'sending'))
            """, logger: logger
        )
        for try await due in rows.decode(Date?.self) { return due }
        return nil
    }

    /// Locks the notification: one outcome of it at a time, so the last of its devices sees the others' states.
    package func lockNotification(_ notificationId: String, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            "SELECT 1 FROM notifications WHERE notification_id = \(notificationId) FOR UPDATE", logger: logger)
    }

    /// Puts the delivery back as pending until `at`, with the provider's answer.
    package func reschedule(
        _ id: Int64, at: Date, providerStatus: Int?, answer: String, on connection: PostgresConnection
    ) async throws {
        try await connection.queryWhileOpen(
            """
            UPDATE deliveries SET status = 'pending', next_attempt_at = \(at), leased_until = NULL,
                   provider_status = \(providerStatus), provider_answer = \(String(answer.prefix(2000))),
                   updated_at = now()
            WHERE id = \(id)
            """, logger: logger
        )
    }

    /// Ends the delivery's lease with `status` and the provider's answer.
    package func finish(
        _ id: Int64, status: DeliveryStatus, providerStatus: Int?, answer: String, on connection: PostgresConnection
    ) async throws {
        try await connection.queryWhileOpen(
            """
            UPDATE deliveries SET status = \(status), leased_until = NULL, provider_status = \(providerStatus),
                   provider_answer = \(String(answer.prefix(2000))), updated_at = now()
            WHERE id = \(id)
            """, logger: logger
        )
    }

    /// Ends the leases of deliveries the provider took, with its answers.
    package func finishSent(
        _ sent: [(deliveryId: Int64, providerStatus: Int, answer: String)], on connection: PostgresConnection
    ) async throws {
        try await connection.queryWhileOpen(
            """
            UPDATE deliveries d SET status = 'sent', leased_until = NULL, provider_status = u.status,
                   provider_answer = u.answer, updated_at = now()
            FROM unnest(\(sent.map(\.deliveryId))::bigint[], \(sent.map(\.providerStatus))::integer[],
                        \(sent.map { String($0.answer.prefix(2000)) })::text[]) AS u(id, status, answer)
            WHERE d.id = u.id
            """, logger: logger
        )
    }

    /// Keeps a delivery that failed for good, with why.
    package func addDeadLetter(_ attempt: Attempt, reason: String, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            INSERT INTO push_dead_letters (delivery_id, notification_id, token, platform, reason)
            VALUES (\(attempt.deliveryId), \(attempt.message.notificationId), \(attempt.token), \(attempt.platform),
                    \(reason))
            """, logger: logger
        )
    }

    /// Forgets a device whose token the provider called dead.
    package func removeDevice(token: String, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen("DELETE FROM devices WHERE token = \(token)", logger: logger)
    }

    /// Marks the pending ones of these notifications sent; for each, its number of deliveries (the others were
    /// sent or failed before).
    package func markSent(_ notificationIds: [String], on connection: PostgresConnection) async throws
        -> [String: Int]
    {
        let rows = try await connection.queryWhileOpen(
            """
            UPDATE notifications n SET status = 'sent'
            WHERE notification_id = ANY(\(notificationIds)::text[]) AND status = 'pending'
            RETURNING notification_id, (SELECT count(*) FROM deliveries d WHERE d.notification_id = n.notification_id)
            """, logger: logger
        )
        var devices: [String: Int] = [:]
        for try await (id, count) in rows.decode((String, Int).self) { devices[id] = count }
        return devices
    }

    /// Marks a pending notification failed if none of its deliveries is under way or sent; whether it did.
    /// How a notification failed on every device: each token was dead, or something else (the provider, our
    /// credentials) failed at least one.
    package enum EveryDeviceFailed: Sendable {
        case tokensDead
        case otherwise
    }

    /// Marks the notification failed if none of its deliveries is still under way or sent; nil if it was not.
    package func markFailedIfNoneLeft(_ notificationId: String, on connection: PostgresConnection) async throws
        -> EveryDeviceFailed?
    {
        let rows = try await connection.queryWhileOpen(
            """
            UPDATE notifications SET status = 'failed'
            WHERE notification_id = \(notificationId) AND status = 'pending'
              AND NOT EXISTS (SELECT 1 FROM deliveries WHERE notification_id = \(notificationId)
                                                         AND status IN ('pending', 'sending', 'sent'))
            RETURNING NOT EXISTS (SELECT 1 FROM deliveries WHERE notification_id = \(notificationId)
                                                             AND status <> 'token_removed')
            """, logger: logger
        )
        for try await allTokensDead in rows.decode(Bool.self) { return allTokensDead ? .tokensDead : .otherwise }
        return nil
    }
}

/// A notification's `data` column (jsonb, read as text) as the string map it was written from.
func pushData(fromJSON text: String) -> [String: String] {
    (try? JSONDecoder().decode([String: String].self, from: Data(text.utf8))) ?? [:]
}
