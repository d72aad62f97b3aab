import Contracts
import Foundation
import Kafka
import Logging
import Metrics
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Consumes topics as a consumer-group member and applies each event, committing the Kafka offset only after
/// the effect is done (at-least-once).
///
/// A message that is not a valid event is logged, kept in `dead_letters` when a database is at hand, and
/// skipped. A failing effect is retried with backoff: forever while the failure looks transient (database
/// unreachable), up to ``maximumAttempts`` otherwise, after which the message is dead-lettered.
package final class EventConsumer: Service, Sendable {
    /// What to do with each event.
    package enum Effect: Sendable {
        /// Runs in a transaction together with the inbox claim: the effect happens once per event id. The events
        /// already fetched, up to the consumer's batch limit, share one transaction, each handled in order.
        case transactional(Database, @Sendable (DecodedEvent, PostgresConnection) async throws -> Void)
        /// Like `transactional`, and the returned follow-up (e.g. telling sockets) runs after the commit.
        case transactionalWithFollowUp(Database, @Sendable (DecodedEvent, PostgresConnection) async throws -> FollowUp?)
        /// Like `transactionalWithFollowUp` for the events already fetched, up to the consumer's batch limit, at
        /// once: one transaction, one inbox claim; the handler gets those not seen before, in order.
        case transactionalBatch(Database, @Sendable ([DecodedEvent], PostgresConnection) async throws -> FollowUp?)
        /// Runs as is (e.g. pushing to sockets); must tolerate the same event twice.
        case direct(@Sendable (DecodedEvent) async throws -> Void)
    }

    /// Work to do once an effect's transaction committed.
    package typealias FollowUp = @Sendable () async -> Void

    /// What a handler does with one event in its transaction. A handler that picks this per event also tells
    /// `wanted` which events it skips: those it has no step for.
    package typealias Step<Result> = @Sendable (PostgresConnection) async throws -> Result

    /// Where the consumer reads from.
    package enum Start: Sendable {
        /// Where its group committed (the group's members share the partitions).
        case group
        /// On each instance for itself, from the records stamped `replay` before it started: no group, nothing
        /// committed, nothing missed while it was starting, and what the service published while it was down for
        /// up to `replay` applied again (the effect must tolerate repeats).
        case eachInstance(replay: Duration, now: @Sendable () -> Date)
    }

    package let name: String
    package let topics: [Topic]
    /// How many events one transaction applies at most (always 1 for a `direct` effect).
    package let batchLimit: Int
    private let configuration: KafkaConsumerConfiguration
    private let start: Start
    private let effect: Effect
    /// Told once a batch's effects are done.
    private let activity: Activity?
    private let wanted: @Sendable (DecodedEvent) -> Bool
    private let logger: Logger
    package let maximumAttempts = 5
    private let processed: Counter
    private let deadLettered: Counter
    /// The Kafka consumer while ``run()`` runs.
    private let running = Mutex<KafkaConsumer?>(nil)

    /// Whether the consumer has partitions to read: a group member once the group assigned it some, a reader on
    /// each instance once it located where to start. What a test waits for before producing what it consumes.
    package var hasPartitions: Bool { running.withLock { $0.map { !$0.assignment().isEmpty } ?? false } }

    /// - Parameters:
    ///   - name: the consumer's name, unique in the service: its inbox key and the suffix of its group id.
    ///   - topics: the topics to consume.
    ///   - configuration: the consumer-group configuration.
    ///   - start: a group member (the default) or a reader on each instance.
    ///   - batchLimit: how many events already fetched one transaction applies at most (a `direct` effect gets
    ///     one at a time).
    ///   - wanted: whether the effect may act on an event; the others are skipped without a transaction (no inbox
    ///     row, no round trip). It may pass more than the effect acts on, never less.
    ///   - activity: told once each batch's effects are done.
    package init(
        name: String, topics: [Topic], configuration: KafkaConsumerConfiguration, start: Start = .group,
        batchLimit: Int = 1, wanted: @escaping @Sendable (DecodedEvent) -> Bool = { _ in true }, effect: Effect,
        activity: Activity? = nil, logger: Logger
    ) {
        self.activity = activity
        self.name = name
        self.topics = topics
        if case .direct = effect { self.batchLimit = 1 } else { self.batchLimit = max(batchLimit, 1) }
        self.configuration = configuration
        self.start = start
        self.effect = effect
        self.wanted = wanted
        var logger = logger
        logger[metadataKey: "kafka.consumer"] = "\(name)"
        self.logger = logger
        self.processed = Counter(label: "events_consumed_total", dimensions: [("consumer", name)])
        self.deadLettered = Counter(label: "events_dead_lettered_total", dimensions: [("consumer", name)])
    }

    package func run() async throws {
        let consumer: KafkaConsumer
        switch start {
        case .group:
            consumer = try KafkaConsumer(configuration: configuration, topics: topics.map(\.rawValue), logger: logger)
        case .eachInstance(let replay, let now):
            let since = now() - replay
            // Locating where to start waits for the broker: a shutdown meanwhile ends it.
            do {
                consumer = try await cancelWhenGracefulShutdown {
                    try await KafkaConsumer.reading(
                        self.topics.map(\.rawValue), since: since, configuration: self.configuration,
                        logger: self.logger)
                }
            } catch is CancellationError {
                return
            }
        }
        logger.info(
            "consuming",
            metadata: ["kafka.topics": "\(topics.map(\.rawValue))", "kafka.group": "\(configuration.groupId)"]
        )
        running.withLock { $0 = consumer }
        do {
            try await cancelWhenGracefulShutdown {
                try await self.consume(consumer)
            }
        } catch is CancellationError {
        }
        running.withLock { $0 = nil }
        await consumer.close()
    }

    /// Applies messages in order, committing each batch's offsets once its effects are done.
    private func consume(_ consumer: KafkaConsumer) async throws {
        for try await batch in consumer.batches(limit: batchLimit) {
            guard await process(batch) else { return }
            activity?.happened()
            guard case .group = start else { continue }
            var offsets: [KafkaTopicPartition: Int64] = [:]
            for message in batch {
                offsets[KafkaTopicPartition(topic: message.topic, partition: message.partition)] = message.offset
            }
            do {
                // Effects are idempotent (the inbox, or fan-out that tolerates a repeat): a commit lost in flight
                // only means a redelivery, so the broker's answer is not waited for.
                try await consumer.commit(offsets, waitForBroker: false)
            } catch {
                logger.warning(
                    "offset commit failed; the message may be delivered again", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Applies a batch of messages, those the effect wants: all in one transaction when that succeeds the first
    /// time, else one at a time with retries, so one bad event never holds up the rest. Returns false only when
    /// cancelled before the effects completed.
    private func process(_ batch: [KafkaMessage]) async -> Bool {
        var decoded: [(message: KafkaMessage, event: DecodedEvent)] = []
        var unwanted = 0
        for message in batch {
            do {
                let event = try EventCatalog.decode(message.value)
                if wanted(event) { decoded.append((message, event)) } else { unwanted += 1 }
            } catch {
                await deadLetter(message, error: error)
            }
        }
        processed.increment(by: unwanted)
        if decoded.count > 1 {
            do {
                try await apply(decoded.map(\.event))
                processed.increment(by: decoded.count)
                return true
            } catch {
                if Task.isCancelled { return false }
                logger.notice(
                    "a batch of events failed; applying them one at a time",
                    metadata: ["events": "\(decoded.count)", "error": "\(error)"])
            }
        }
        for (message, event) in decoded {
            guard await process(event, of: message) else { return false }
        }
        return true
    }

    /// Applies one event, retrying with backoff. Returns false only when cancelled before the effect completed.
    private func process(_ event: DecodedEvent, of message: KafkaMessage) async -> Bool {
        var attempt = 0
        var backoff = Duration.milliseconds(100)
        while true {
            attempt += 1
            do {
                try await apply([event])
                processed.increment()
                return true
            } catch {
                if Task.isCancelled { return false }
                let transient = Self.isTransient(error)
                if !transient, attempt >= maximumAttempts {
                    await deadLetter(message, error: error)
                    return true
                }
                logger.warning(
                    "event effect failed; retrying",
                    metadata: [
                        "event.type": "\(event.header.type)", "event.id": "\(event.header.eventId)",
                        "attempt": "\(attempt)", "error": "\(error)",
                    ]
                )
                do {
                    try await Task.sleep(for: backoff)
                } catch {
                    return false
                }
                backoff = min(backoff * 2, .seconds(10))
            }
        }
    }

    /// Whether every instance consumes for itself (a stream consumer, for its sockets) rather than the service's
    /// instances sharing one group.
    package var eachInstance: Bool {
        if case .eachInstance = start { return true }
        return false
    }

    /// Applies events together (one at a time for a `direct` effect), in one transaction for the others.
    private func apply(_ events: [DecodedEvent]) async throws {
        switch effect {
        case .direct(let handler):
            for event in events { try await handler(event) }
        case .transactional(let database, let handler):
            _ = try await applyOnce(events, database: database) {
                (fresh: [DecodedEvent], connection: PostgresConnection) async throws -> Void? in
                for event in fresh { try await handler(event, connection) }
                return nil
            }
        case .transactionalWithFollowUp(let database, let handler):
            let followUps = try await applyOnce(events, database: database) {
                (fresh: [DecodedEvent], connection: PostgresConnection) async throws -> [FollowUp] in
                var followUps: [FollowUp] = []
                for event in fresh {
                    if let followUp = try await handler(event, connection) { followUps.append(followUp) }
                }
                return followUps
            }
            for followUp in followUps ?? [] { await followUp() }
        case .transactionalBatch(let database, let handler):
            let followUp = try await applyOnce(events, database: database) { fresh, connection in
                try await handler(fresh, connection)
            }
            await followUp?()
        }
    }

    /// Runs `body` with the events not seen before, in a transaction with their inbox claim; skips duplicates.
    private func applyOnce<Result: Sendable>(
        _ events: [DecodedEvent], database: Database,
        _ body: @Sendable ([DecodedEvent], PostgresConnection) async throws -> Result?
    ) async throws -> Result? {
        try await database.transaction { connection in
            let claimed = try await Inbox.claim(
                events.map { ($0.header.eventId, $0.header.type) }, consumer: name, on: connection, logger: logger)
            // An event repeated within the batch (a republish) is claimed once, so it is applied once.
            var unapplied = claimed
            let fresh = events.filter { unapplied.remove($0.header.eventId) != nil }
            if fresh.count < events.count {
                logger.debug("duplicate events skipped", metadata: ["events": "\(events.count - fresh.count)"])
            }
            if fresh.isEmpty { return nil }
            return try await body(fresh, connection)
        }
    }

    private func deadLetter(_ message: KafkaMessage, error: any Error) async {
        deadLettered.increment()
        logger.error(
            "skipping a message that cannot be applied",
            metadata: [
                "kafka.topic": "\(message.topic)", "kafka.partition": "\(message.partition)",
                "kafka.offset": "\(message.offset)", "error": "\(error)",
            ]
        )
        let database: Database
        switch effect {
        case .transactional(let value, _), .transactionalWithFollowUp(let value, _), .transactionalBatch(let value, _):
            database = value
        case .direct: return
        }
        do {
            try await database.execute(
                """
                INSERT INTO dead_letters (consumer, topic, kafka_partition, kafka_offset, message_key, payload, error)
                VALUES (\(name), \(message.topic), \(Int(message.partition)), \(message.offset), \(message.keyString),
                        \(ByteBuffer(data: message.value)), \("\(error)"))
                """
            )
        } catch {
            logger.error("could not store the dead letter", metadata: ["error": "\(error)"])
        }
    }

    /// Failures worth retrying without limit: the database or the network is away, not the event at fault.
    static func isTransient(_ error: any Error) -> Bool {
        if let error = error as? PSQLError {
            guard let state = error.sqlState else { return true }  // no server answer: connection-level
            return ["08", "53", "57", "40"].contains(String(state.prefix(2)))
        }
        if let error = error as? KafkaError { return error.isRetriable }
        return Database.isUnavailable(error)
    }
}

/// A service's consumers as one service: they run side by side and a graceful shutdown closes them all at once,
/// so the service stops within one consumer's close time (which may wait on the broker), not their sum.
package struct EventConsumers: Service {
    let consumers: [EventConsumer]

    package init(_ consumers: [EventConsumer]) { self.consumers = consumers }

    package func run() async throws {
        try await withThrowingDiscardingTaskGroup { group in
            for consumer in consumers {
                group.addTask { try await consumer.run() }
            }
        }
    }
}
