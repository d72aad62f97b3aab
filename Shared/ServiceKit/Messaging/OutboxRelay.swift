import Contracts
import Foundation
import Kafka
import Logging
import Metrics
import PostgresNIO
import ServiceLifecycle

/// Publishes committed outbox rows to Kafka, in order per aggregate, and marks a row published only after the
/// broker acknowledged it. Woken by LISTEN/NOTIFY on commit, with a polling fallback.
///
/// One instance per schema publishes at a time (a session advisory lock elects it); the others stand by. When
/// the broker is down rows stay pending and are retried with backoff; nothing is lost and the service stays up.
package final class OutboxRelay: Service, Sendable {
    private let database: Database
    private let producer: KafkaProducer
    private let outbox: Outbox
    private let settings: ServiceConfiguration.OutboxSettings
    private let logger: Logger
    private let published = Counter(label: "outbox_published_total")
    private let failures = Counter(label: "outbox_publish_failures_total")
    private let lag = Timer(label: "outbox_publish_lag_seconds")

    package init(
        database: Database, producer: KafkaProducer, outbox: Outbox, settings: ServiceConfiguration.OutboxSettings,
        logger: Logger
    ) {
        self.database = database
        self.producer = producer
        self.outbox = outbox
        self.settings = settings
        self.logger = logger
    }

    package func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await self.runWhileLeader()
                } catch is CancellationError {
                    return
                } catch {
                    if Task.isCancelled { return }
                    self.logger.warning("outbox relay restarting", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Publishes until cancelled while holding the schema's relay lock; returns at once if another instance
    /// holds it.
    private func runWhileLeader() async throws {
        let lockName = "\(database.schema).outbox-relay"
        try await database.client.withConnection { connection in
            let rows = try await connection.query("SELECT pg_try_advisory_lock(hashtext(\(lockName)))", logger: logger)
            var isLeader = false
            for try await locked in rows.decode(Bool.self) { isLeader = locked }
            guard isLeader else {
                try await Task.sleep(for: .seconds(5))
                return
            }
            logger.debug("outbox relay is publishing", metadata: ["db.schema": "\(database.schema)"])
            do {
                try await connection.listen(on: outbox.channel) { notifications in
                    try await publishUntilCancelled(notifications: notifications)
                }
            } catch {
                await releaseLock(on: connection, after: error)
                throw error
            }
            await releaseLock(on: connection, after: nil)
        }
    }

    /// Gives the relay lock up so a standby instance can take over. Not when the connection was lost: its session
    /// ended and took the lock with it.
    private func releaseLock(on connection: PostgresConnection, after error: (any Error)?) async {
        guard !(error is NotificationsLost) else { return }
        await connection.cleanUp("SELECT pg_advisory_unlock_all()", logger: logger)
    }

    private func publishUntilCancelled(notifications: PostgresNotificationSequence) async throws {
        let (wakeups, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    for try await _ in notifications { wake.yield() }
                } catch {
                    if error is CancellationError || Task.isCancelled { throw error }
                    throw NotificationsLost(reason: String(reflecting: error))
                }
                if Task.isCancelled { throw CancellationError() }
                throw NotificationsLost(reason: "the notification sequence ended")
            }
            group.addTask { [settings] in
                while true {
                    try await Task.sleep(for: settings.pollInterval)
                    wake.yield()
                }
            }
            group.addTask {
                var backoff = Duration.milliseconds(500)
                var lastCleanup = ContinuousClock.now
                wake.yield()
                for await _ in wakeups {
                    do {
                        try await self.drain()
                        backoff = .milliseconds(500)
                    } catch is CancellationError {
                        return
                    } catch {
                        self.logger.warning(
                            "outbox publishing failed; rows stay pending",
                            metadata: ["error": "\(error)", "retry.in": "\(backoff)"]
                        )
                        try? await Task.sleep(for: backoff)
                        backoff = min(backoff * 2, .seconds(30))
                        wake.yield()
                    }
                    if ContinuousClock.now - lastCleanup > .seconds(3600) {
                        lastCleanup = .now
                        try? await self.deleteExpiredRows()
                    }
                }
            }
            defer { group.cancelAll() }
            try await group.next()
        }
    }

    private struct PendingRow: Sendable {
        var id: Int64
        var topic: String
        var key: String
        var payload: String
        var createdAt: Date
    }

    /// Publishes pending rows batch by batch. A row is marked published only if it and every earlier pending
    /// row with its key were acknowledged, so per-aggregate order survives a partial failure.
    func drain() async throws {
        while !Task.isCancelled {
            let rows = try await database.withConnection { connection in
                var rows: [PendingRow] = []
                let result = try await connection.query(
                    """
                    SELECT id, topic, message_key, payload, created_at FROM outbox
                    WHERE published_at IS NULL ORDER BY id LIMIT \(settings.batchSize)
                    """, logger: logger
                )
                for try await (id, topic, key, payload, createdAt) in result.decode(
                    (Int64, String, String, String, Date).self)
                {
                    rows.append(PendingRow(id: id, topic: topic, key: key, payload: payload, createdAt: createdAt))
                }
                return rows
            }
            guard !rows.isEmpty else { return }

            // Enqueued in id order, so each key's rows reach their partition in commit order.
            let results = try await producer.send(
                rows.map { KafkaOutgoingMessage(topic: $0.topic, key: $0.key, value: Data($0.payload.utf8)) }
            )
            var outcomes: [Int64: (any Error)?] = [:]
            for (row, result) in zip(rows, results) {
                if case .failure(let error) = result { outcomes[row.id] = error } else { outcomes[row.id] = .some(nil) }
            }

            var publishedIds: [Int64] = []
            var failed: [(Int64, String)] = []
            var blockedKeys = Set<String>()
            for row in rows {
                if let failure = outcomes[row.id] ?? nil {
                    blockedKeys.insert(row.key)
                    failed.append((row.id, "\(failure)"))
                } else if !blockedKeys.contains(row.key) {
                    publishedIds.append(row.id)
                    lag.recordInterval(since: row.createdAt)
                }
            }
            try await database.withConnection { connection in
                if !publishedIds.isEmpty {
                    try await connection.query(
                        "UPDATE outbox SET published_at = now() WHERE id = ANY(\(publishedIds))", logger: logger
                    )
                }
                for (id, error) in failed {
                    try await connection.query(
                        "UPDATE outbox SET attempts = attempts + 1, last_error = \(error) WHERE id = \(id)",
                        logger: logger
                    )
                }
            }
            published.increment(by: publishedIds.count)
            if let first = failed.first {
                failures.increment(by: failed.count)
                throw OutboxPublishError(failedRows: failed.count, firstError: first.1)
            }
            if rows.count < settings.batchSize { return }
        }
    }

    /// Housekeeping: published outbox rows after the retention, idempotency keys after a day.
    private func deleteExpiredRows() async throws {
        let cutoff = Date().addingTimeInterval(-Double(settings.retention.components.seconds))
        try await database.client.query("DELETE FROM outbox WHERE published_at < \(cutoff)", logger: logger)
        let keyCutoff = Date().addingTimeInterval(-86_400)
        try await database.client.query("DELETE FROM idempotency_keys WHERE created_at < \(keyCutoff)", logger: logger)
    }
}

/// The relay's LISTEN connection failed (Postgres restarted or the network dropped it); the relay starts over.
struct NotificationsLost: Error, CustomStringConvertible {
    var reason: String
    var description: String { "the outbox notification connection was lost: \(reason)" }
}

/// Some outbox rows could not be published this round; they stay pending.
struct OutboxPublishError: Error, CustomStringConvertible {
    var failedRows: Int
    var firstError: String
    var description: String { "\(failedRows) row(s) not acknowledged by the broker: \(firstError)" }
}

extension Timer {
    func recordInterval(since start: Date) {
        recordNanoseconds(Int64(max(0, Date().timeIntervalSince(start)) * 1_000_000_000))
    }
}
