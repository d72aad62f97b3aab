import Contracts
import Foundation
import Kafka
import Logging
import Realtime

/// The realtime log on the broker: one single-partition topic per service (`realtime.<service>`), so every record
/// has one offset every instance agrees on. Each instance reads all of it under a consumer group of its own,
/// from the oldest record the broker keeps.
package struct KafkaRealtimeLog: RealtimeLog {
    package let topic: String
    private let producer: KafkaProducer
    private let consumer: KafkaConsumerConfiguration
    private let logger: Logger

    /// How long the broker keeps records (the topic's `retention.ms`, set when the topic is created): the recovery
    /// window plus two minutes, so an instance that starts holds every emit a client may have missed. Positions in
    /// `location` emits are not kept longer (US-072).
    package static func retention(window: Duration) -> Duration { max(window, .zero) + .seconds(120) }

    /// - Parameters:
    ///   - topic: e.g. `realtime.chat-service`; one per service.
    ///   - consumer: a consumer configuration whose group id is unique to this instance.
    package init(topic: String, producer: KafkaProducer, consumer: KafkaConsumerConfiguration, logger: Logger) {
        self.topic = topic
        self.producer = producer
        var consumer = consumer
        consumer.autoOffsetReset = .earliest
        self.consumer = consumer
        self.logger = logger
    }

    package func append(_ records: [RealtimeRecord]) async throws {
        let messages = try records.map {
            KafkaOutgoingMessage(topic: topic, key: $0.namespace, value: try ContractCoding.encode($0))
        }
        for result in try await producer.send(messages) { _ = try result.get() }
    }

    package func run(apply: @escaping @Sendable (Int64, RealtimeRecord) async -> Void) async throws {
        let consumer = try KafkaConsumer(configuration: consumer, topics: [topic], logger: logger)
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
