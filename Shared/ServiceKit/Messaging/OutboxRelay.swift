import Contracts
import Foundation
import Kafka
import Logging
import Metrics
import PostgresNIO
import ServiceLifecycle
import Synchronization

// The relay and what only it uses: the prepared statements it runs and the error it starts over on.

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
    private let deadLetters = Counter(label: "outbox_dead_letters_total")
    private let lag = Timer(label: "outbox_publish_lag_seconds")
    /// When a publish last failed (or this instance began to lead): rows in back-off are polled for until a
    /// ``retryingWindow`` later, longer than the longest back-off.
    private let lastFailure = Mutex(ContinuousClock.now)
    private static let retryingWindow = OutboxRound.maximumBackoff * 2

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
            let rows = try await connection.queryWhileOpen(
                "SELECT pg_try_advisory_lock(hashtext(\(lockName)))", logger: logger)
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
            lastFailure.withLock { $0 = .now }
            group.addTask { [settings] in
                var lastPoll = ContinuousClock.now
                while true {
                    try await Task.sleep(for: settings.pollInterval)
                    let retrying = self.lastFailure.withLock { .now - $0 < Self.retryingWindow }
                    guard retrying || .now - lastPoll >= settings.idlePollInterval else { continue }
                    lastPoll = .now
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
                        // Postgres itself failed (a broker failure is recorded per row and never ends up here).
                        self.logger.warning(
                            "outbox relay could not read or update its rows",
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

    /// Publishes pending rows batch by batch. A row is marked published only if it and every earlier pending
    /// row with its key were acknowledged, so per-aggregate order survives a partial failure. A failed row waits
    /// for its own back-off, holding only its key; one the broker refuses for good (too large, invalid) is moved
    /// to `outbox_dead_letters` after ``OutboxRelay/permanentFailureAttempts`` tries, and its key stays held
    /// until an operator resolves it.
    func drain() async throws {
        while !Task.isCancelled {
            let rows = try await database.withConnection { connection in
                var rows: [PendingOutboxRow] = []
                let bindings = PostgresBindings(settings.batchSize)
                for row in try await connection.queryWhileOpen(PendingOutboxBatch.self, bindings, logger: logger) {
                    let (id, topic, key, payload, createdAt, attempts) = try row.decode(
                        (Int64, String, String, String, Date, Int).self)
                    rows.append(
                        PendingOutboxRow(
                            id: id, topic: topic, key: key, payload: payload, createdAt: createdAt, attempts: attempts))
                }
                return rows
            }
            guard !rows.isEmpty else { return }

            let sendable = OutboxRound.sendable(rows, maximumBytes: Outbox.maximumEventBytes)
            // Enqueued in id order, so each key's rows reach their partition in commit order.
            let results = try await producer.send(
                sendable.map { KafkaOutgoingMessage(topic: $0.topic, key: $0.key, value: Data($0.payload.utf8)) }
            )
            var answers: [Int64: KafkaError?] = [:]
            for (row, result) in zip(sendable, results) {
                switch result {
                case .success: answers[row.id] = .some(nil)
                case .failure(let error as KafkaError): answers[row.id] = error
                case .failure(let error):
                    answers[row.id] = KafkaError(.deliveryFailed, message: "\(error)", isRetriable: true)
                }
            }
            let round = OutboxRound(rows: rows, answers: answers, maximumBytes: Outbox.maximumEventBytes)
            let publishedIds = round.published.map(\.id)
            let failed = round.failed
            for row in round.published { lag.recordInterval(since: row.createdAt) }
            try await database.withConnection { connection in
                if !publishedIds.isEmpty {
                    let bindings = PostgresBindings(publishedIds)
                    try await connection.queryWhileOpen(MarkOutboxPublished.self, bindings, logger: logger)
                }
                for failure in failed {
                    try await record(failure, on: connection)
                }
            }
            published.increment(by: publishedIds.count)
            failures.increment(by: failed.count)
            if !failed.isEmpty { lastFailure.withLock { $0 = .now } }
            if let first = failed.first(where: { $0.row.attempts == 0 }) {
                logger.warning(
                    "outbox rows not acknowledged; each waits out its back-off, holding only its key",
                    metadata: ["outbox.failed": "\(failed.count)", "error": "\(first.error)"]
                )
            }
            if rows.count < settings.batchSize { return }
        }
    }

    /// Tries a row the broker refused for good gets before it becomes a dead letter.
    package static let permanentFailureAttempts = OutboxRound.permanentFailureAttempts

    /// Records a failed attempt: the row waits out its back-off (0.5 s doubling to 30 s), or, refused for good
    /// too often, moves to `outbox_dead_letters`. Logged on its first failure and when it dies, not every retry.
    private func record(_ failure: OutboxRound.Failure, on connection: PostgresConnection) async throws {
        let row = failure.row
        switch OutboxRound.step(after: failure) {
        case .deadLetter(let attempts):
            try await connection.queryWhileOpen(
                """
                WITH dead AS (DELETE FROM outbox WHERE id = \(row.id) RETURNING *)
                INSERT INTO outbox_dead_letters
                    (id, event_id, topic, message_key, event_type, payload, created_at, attempts, error)
                SELECT id, event_id, topic, message_key, event_type, payload, created_at, \(attempts), \(failure.error)
                FROM dead
                """, logger: logger
            )
            deadLetters.increment()
            logger.error(
                "outbox row refused for good: moved to outbox_dead_letters, its key held",
                metadata: Self.metadata(failure, attempts: attempts))
        case .retry(let attempts, let backoffMilliseconds):
            try await connection.queryWhileOpen(
                """
                UPDATE outbox SET attempts = \(attempts), last_error = \(failure.error),
                    retry_at = now() + \(backoffMilliseconds) * interval '1 millisecond'
                WHERE id = \(row.id)
                """, logger: logger
            )
            logger.debug(
                "outbox row not acknowledged; it waits and is retried",
                metadata: Self.metadata(failure, attempts: attempts))
        }
    }

    private static func metadata(_ failure: OutboxRound.Failure, attempts: Int) -> Logger.Metadata {
        [
            "outbox.id": "\(failure.row.id)", "kafka.topic": "\(failure.row.topic)", "kafka.key": "\(failure.row.key)",
            "outbox.attempts": "\(attempts)", "error": "\(failure.error)",
        ]
    }

    /// Throws ``Degradation`` naming the held aggregates while `outbox_dead_letters` has rows.
    package static func checkDeadLetters(in database: Database) async throws {
        let (count, held) = try await database.withConnection { connection in
            let rows = try await connection.queryWhileOpen(
                """
                SELECT count(*) OVER (), event_type, message_key FROM outbox_dead_letters ORDER BY id LIMIT 5
                """, logger: database.logger
            )
            var count = 0
            var held: [String] = []
            for try await (total, type, key) in rows.decode((Int, String, String).self) {
                count = total
                held.append("\(type) for \(key)")
            }
            return (count, held)
        }
        guard count > 0 else { return }
        throw Degradation(
            "\(count) outbox event(s) refused by the broker, their keys held: " + held.joined(separator: ", "))
    }

    /// Housekeeping: published outbox rows after the retention, idempotency keys after a day.
    private func deleteExpiredRows() async throws {
        let cutoff = Date() - settings.retention
        try await database.execute("DELETE FROM outbox WHERE published_at < \(cutoff)")
        let keyCutoff = Date().addingTimeInterval(-86_400)
        try await database.execute("DELETE FROM idempotency_keys WHERE created_at < \(keyCutoff)")
    }
}

/// The next rows to publish, at most $1: the oldest of each key not waiting out a back-off (migration 0005).
enum PendingOutboxBatch: PreparedStatementText {
    static let sql = """
        SELECT id, topic, message_key, payload, created_at, attempts FROM outbox_pending_batch($1::bigint)
        """
}

/// Marks the rows $1 published.
enum MarkOutboxPublished: PreparedStatementText {
    static let sql = "UPDATE outbox SET published_at = now() WHERE id = ANY($1::bigint[])"
}

/// The relay's LISTEN connection failed (Postgres restarted or the network dropped it); the relay starts over.
struct NotificationsLost: Error, CustomStringConvertible {
    var reason: String
    var description: String { "the outbox notification connection was lost: \(reason)" }
}

extension Timer {
    func recordInterval(since start: Date) {
        recordNanoseconds(Int64(max(0, Date().timeIntervalSince(start)) * 1_000_000_000))
    }
}
