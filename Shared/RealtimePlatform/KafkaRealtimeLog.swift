import Contracts
import Foundation
import Kafka
import Logging
import Realtime
import ServiceKit

/// The realtime log on the broker: one single-partition topic per service (`realtime.<service>`), so every record
/// has one offset every instance agrees on. Each instance reads it without a consumer group, from the first record
/// stamped within the retention (the oldest a client recovering here may need), so a start never replays more than
/// that however long the broker keeps records.
package struct KafkaRealtimeLog: RealtimeLog {
    package let topic: String
    private let producer: KafkaProducer
    private let consumer: KafkaConsumerConfiguration
    private let retention: Duration
    private let now: @Sendable () -> Date
    private let logger: Logger

    /// How long the broker keeps records (the topic's `retention.ms`, set when the topic is created): the recovery
    /// window plus two minutes, so an instance that starts holds every emit a client may have missed. Positions in
    /// `location` emits are not kept longer (US-072).
    package static func retention(window: Duration) -> Duration { max(window, .zero) + .seconds(120) }

    /// The topic's configuration: records kept for `retention`, in segments of at most half of it (a broker deletes
    /// whole segments only, so one segment per week, the default, would keep a week).
    package static func topicConfiguration(retention: Duration) -> [String: String] {
        ["retention.ms": String(retention.milliseconds), "segment.ms": String(max(retention.milliseconds / 2, 1))]
    }

    /// - Parameters:
    ///   - topic: e.g. `realtime.chat-service`; one per service.
    ///   - consumer: a consumer configuration with an id unique to this instance (it joins no group).
    ///   - retention: how far back a starting instance reads: ``retention(window:)``.
    ///   - now: the clock the records' timestamps are compared with.
    package init(
        topic: String, producer: KafkaProducer, consumer: KafkaConsumerConfiguration, retention: Duration,
        now: @escaping @Sendable () -> Date = Date.init, logger: Logger
    ) {
        self.topic = topic
        self.producer = producer
        self.consumer = consumer
        self.retention = retention
        self.now = now
        self.logger = logger
    }

    package func append(_ records: [RealtimeRecord]) async throws {
        let messages = try records.map {
            KafkaOutgoingMessage(topic: topic, key: $0.namespace, value: try ContractCoding.encode($0))
        }
        for result in try await producer.send(messages) { _ = try result.get() }
    }

    package func run(apply: @escaping @Sendable (Int64, RealtimeRecord) async -> Void) async throws {
        let consumer = try await KafkaConsumer.reading(
            [topic], since: now() - retention, configuration: consumer, logger: logger)
        do {
            for try await message in consumer.messages {
                do {
                    await apply(message.offset, try ContractCoding.decode(RealtimeRecord.self, from: message.value))
                } catch {
                    logger.warning(
                        "skipping an unreadable realtime record",
                        metadata: ["error": "\(error)", "realtime.offset": "\(message.offset)"])
                }
            }
        } catch {
            await consumer.close()
            throw error
        }
        await consumer.close()
    }
}
