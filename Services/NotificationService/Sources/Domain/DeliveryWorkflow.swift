import Contracts
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// Notification's transactions: accepting a request (deduplicated by notification id), leasing a delivery for
/// an attempt, and recording what the provider said (retry, token clean-up, dead letter, PushSent / PushFailed),
/// decided by ``DeliveryRules`` and stored through ``NotificationStore``.
package struct DeliveryWorkflow: Sendable {
    let store: NotificationStore
    let settings: NotificationSettings
    let outbox: Outbox
    let now: Now
    let logger: Logger

    package init(settings: NotificationSettings, outbox: Outbox, now: Now, logger: Logger) {
        self.store = NotificationStore(logger: logger)
        self.settings = settings
        self.outbox = outbox
        self.now = now
        self.logger = logger
    }

    /// Records the request and a delivery per device of the user; returns the deliveries to attempt. A
    /// notification id seen before is skipped; a user without devices is logged as such (PushFailed no_devices).
    package func accept(_ request: PushRequested, on connection: PostgresConnection) async throws -> [Int64] {
        guard try await store.insert(request, on: connection) else {
            logger.info("duplicate notification skipped", metadata: ["notification.id": "\(request.notificationId)"])
            return []
        }
        let now = self.now()
        let ids = try await store.addDeliveries(of: request, now: now, on: connection)
        if ids.isEmpty {
            try await store.setStatus("no_devices", notificationId: request.notificationId, on: connection)
            try await outbox.enqueue(
                PushFailed(
                    notificationId: request.notificationId, userId: request.userId, kind: request.kind,
                    correlationId: request.correlationId, reason: PushFailed.noDevicesReason, failedAt: now
                ),
                aggregateId: request.userId, on: connection, logger: logger
            )
            logger.info(
                "user has no devices; nothing pushed",
                metadata: ["notification.id": "\(request.notificationId)", "user.id": "\(request.userId)"])
        }
        return ids
    }

    /// Leases delivery `id` for an attempt if it is due; nil if it is not.
    package func lease(_ id: Int64, on connection: PostgresConnection) async throws -> NotificationStore.Attempt? {
        let now = self.now()
        return try await store.lease(
            id, now: now, until: now + DeliveryRules.lease(timeout: settings.timeout), on: connection)
    }

    /// Deliveries due for an attempt now.
    package func due(limit: Int, on connection: PostgresConnection) async throws -> [Int64] {
        try await store.due(now: now(), limit: limit, on: connection)
    }

    /// Records an attempt's outcome.
    package func record(_ attempt: NotificationStore.Attempt, outcome: PushOutcome, on connection: PostgresConnection)
        async throws
    {
        let id = attempt.deliveryId
        try await store.lockNotification(attempt.message.notificationId, on: connection)
        switch (DeliveryRules.decide(outcome, attempt: attempt.attempt, settings: settings), outcome.answer) {
        case (.sent, let answer):
            try await store.finish(
                id, status: "sent", providerStatus: answer.status, answer: answer.text, on: connection)
            try await announceSent(attempt, on: connection)
        case (.retry(let delay), let answer):
            try await store.reschedule(
                id, at: now() + delay, providerStatus: answer.status, answer: answer.text, on: connection)
            logger.info(
                "push will be retried",
                metadata: [
                    "delivery.id": "\(id)", "attempt": "\(attempt.attempt)",
                    "status": "\(answer.status.map(String.init) ?? "-")",
                ])
        case (.giveUp(let reason), let answer):
            try await store.finish(
                id, status: "failed", providerStatus: answer.status, answer: answer.text, on: connection)
            try await store.addDeadLetter(
                attempt, reason: reason + ": " + String(answer.text.prefix(500)), on: connection)
            logger.warning("push failed for good", metadata: ["delivery.id": "\(id)", "reason": "\(reason)"])
            try await announceIfAllFailed(attempt, reason: reason, on: connection)
        case (.removeToken, let answer):
            try await store.finish(
                id, status: "token_removed", providerStatus: answer.status, answer: answer.text, on: connection)
            try await store.removeDevice(token: attempt.token, on: connection)
            logger.info(
                "removed a dead device token",
                metadata: ["delivery.id": "\(id)", "platform": "\(attempt.platform.rawValue)"])
            try await announceIfAllFailed(attempt, reason: PushFailed.invalidTokenReason, on: connection)
        }
    }

    /// The first device that got it makes the notification sent (PushSent, once).
    private func announceSent(_ attempt: NotificationStore.Attempt, on connection: PostgresConnection) async throws {
        guard let devices = try await store.markSent(attempt.message.notificationId, on: connection) else { return }
        try await outbox.enqueue(
            PushSent(
                notificationId: attempt.message.notificationId, userId: attempt.userId, kind: attempt.message.kind,
                correlationId: attempt.correlationId, deviceCount: devices, sentAt: now()
            ),
            aggregateId: attempt.userId, on: connection, logger: logger
        )
    }

    /// When no delivery of the notification is left under way and none was sent: failed (PushFailed, once). The
    /// reason says "device token no longer valid" only when that is so for every device, whichever failed last.
    private func announceIfAllFailed(
        _ attempt: NotificationStore.Attempt, reason lastReason: String, on connection: PostgresConnection
    ) async throws {
        guard let failed = try await store.markFailedIfNoneLeft(attempt.message.notificationId, on: connection)
        else { return }
        let reason =
            failed == .tokensDead
            ? PushFailed.invalidTokenReason
            : lastReason == PushFailed.invalidTokenReason ? "failed on every device" : lastReason
        try await outbox.enqueue(
            PushFailed(
                notificationId: attempt.message.notificationId, userId: attempt.userId, kind: attempt.message.kind,
                correlationId: attempt.correlationId, reason: reason, failedAt: now()
            ),
            aggregateId: attempt.userId, on: connection, logger: logger
        )
    }
}
