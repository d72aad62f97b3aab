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

    /// Records the requests and a delivery per device of each user; returns the deliveries to attempt. A
    /// notification id seen before is skipped; a user without devices is logged as such (PushFailed no_devices).
    package func accept(_ requests: [PushRequested], on connection: PostgresConnection) async throws -> [Int64] {
        let now = self.now()
        let (fresh, deliveries) = try await store.insert(requests, now: now, on: connection)
        for request in requests where !fresh.contains(request.notificationId) {
            logger.info("duplicate notification skipped", metadata: ["notification.id": "\(request.notificationId)"])
        }
        let delivered = Set(deliveries.map(\.notificationId))
        var failed = Set<String>()
        for request in requests
        where fresh.contains(request.notificationId) && !delivered.contains(request.notificationId)
            && failed.insert(request.notificationId).inserted
        {
            try await store.setStatus(.noDevices, notificationId: request.notificationId, on: connection)
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
        return deliveries.map(\.id)
    }

    /// Leases those of deliveries `ids` that are due, each for one attempt; with the time the leases began.
    package func lease(_ ids: [Int64], on connection: PostgresConnection) async throws
        -> (attempts: [NotificationStore.Attempt], leasedAt: Date)
    {
        let now = self.now()
        let attempts = try await store.lease(
            ids, now: now, until: now + DeliveryRules.lease(timeout: settings.timeout), on: connection)
        return (attempts, now)
    }

    /// Deliveries due for an attempt now.
    package func due(limit: Int, on connection: PostgresConnection) async throws -> [Int64] {
        try await store.due(now: now(), limit: limit, on: connection)
    }

    /// When the next retry is due or the next lease runs out; nil when no delivery waits.
    package func nextDue(on connection: PostgresConnection) async throws -> Date? {
        try await store.nextDue(on: connection)
    }

    /// Records attempts' outcomes: those the provider took together (a few statements however many), the others
    /// one by one.
    package func record(
        _ outcomes: [(attempt: NotificationStore.Attempt, outcome: PushOutcome)], on connection: PostgresConnection
    ) async throws {
        var sent: [NotificationStore.Attempt] = []
        var answers: [(deliveryId: Int64, providerStatus: Int, answer: String)] = []
        for (attempt, outcome) in outcomes {
            if case .sent(let status, let answer) = outcome {
                sent.append(attempt)
                answers.append((attempt.deliveryId, status, answer))
            } else {
                try await record(attempt, outcome: outcome, on: connection)
            }
        }
        if sent.isEmpty { return }
        try await store.finishSent(answers, on: connection)
        try await announceSent(sent, on: connection)
    }

    /// Records an attempt's outcome other than sent.
    private func record(_ attempt: NotificationStore.Attempt, outcome: PushOutcome, on connection: PostgresConnection)
        async throws
    {
        let id = attempt.deliveryId
        try await store.lockNotification(attempt.message.notificationId, on: connection)
        switch (DeliveryRules.decide(outcome, attempt: attempt.attempt, settings: settings), outcome.answer) {
        case (.sent, let answer):
            try await store.finishSent([(id, answer.status ?? 0, answer.text)], on: connection)
            try await announceSent([attempt], on: connection)
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
                id, status: .failed, providerStatus: answer.status, answer: answer.text, on: connection)
            try await store.addDeadLetter(
                attempt, reason: reason + ": " + String(answer.text.prefix(500)), on: connection)
            logger.warning("push failed for good", metadata: ["delivery.id": "\(id)", "reason": "\(reason)"])
            try await announceIfAllFailed(attempt, reason: reason, on: connection)
        case (.removeToken, let answer):
            try await store.finish(
                id, status: .tokenRemoved, providerStatus: answer.status, answer: answer.text, on: connection)
            try await store.removeDevice(token: attempt.token, on: connection)
            logger.info(
                "removed a dead device token",
                metadata: ["delivery.id": "\(id)", "platform": "\(attempt.platform.rawValue)"])
            try await announceIfAllFailed(attempt, reason: PushFailed.invalidTokenReason, on: connection)
        }
    }

    /// The first device that got it makes the notification sent (PushSent, once).
    private func announceSent(_ attempts: [NotificationStore.Attempt], on connection: PostgresConnection) async throws {
        let devices = try await store.markSent(Array(Set(attempts.map(\.message.notificationId))), on: connection)
        var announced = Set<String>()
        let now = self.now()
        let events = attempts.compactMap { attempt -> (envelope: EventEnvelope<PushSent>, key: String?)? in
            let id = attempt.message.notificationId
            guard let count = devices[id], announced.insert(id).inserted else { return nil }
            let sent = PushSent(
                notificationId: id, userId: attempt.userId, kind: attempt.message.kind,
                correlationId: attempt.correlationId, deviceCount: count, sentAt: now)
            return (EventEnvelope(aggregateId: attempt.userId, occurredAt: now, payload: sent), nil)
        }
        try await outbox.enqueue(events, on: connection, logger: logger)
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
