import Contracts
import Foundation
import Kafka
import Logging
import Realtime

/// The Kafka-backed adapter: every instance publishes to one topic and consumes all of it under a consumer
/// group of its own (so each instance sees every broadcast), starting from the latest offset.
package struct KafkaRealtimeAdapter: RealtimeAdapter {
    /// How long the broker keeps a broadcast (its topic's `retention.ms`, set when the topic is created): instances
    /// read from the latest offset, so nothing older is ever read, and positions in `location` emits must not be
    /// kept (US-072).
    package static let retention: Duration = .seconds(60)

    package let topic: String
    private let producer: KafkaProducer
    private let consumer: KafkaConsumerConfiguration
    private let logger: Logger

    /// - Parameters:
    ///   - topic: e.g. `realtime.chat-service`; one per service.
    ///   - consumer: a consumer configuration whose group id is unique to this instance.
    package init(topic: String, producer: KafkaProducer, consumer: KafkaConsumerConfiguration, logger: Logger) {
        self.topic = topic
        self.producer = producer
        var consumer = consumer
        consumer.autoOffsetReset = .latest
        self.consumer = consumer
        self.logger = logger
    }

    package func publish(_ broadcast: RealtimeBroadcast) async throws {
        try await producer.send(
            topic: topic,
            key: Self.key(origin: broadcast.origin) + broadcast.namespace + "|" + (broadcast.rooms.first ?? ""),
            value: try ContractCoding.encode(broadcast)
        )
    }

    /// Keys start with the origin, so an instance skips its own broadcasts without decoding them.
    static func key(origin: String) -> String { origin + "|" }

    package func run(origin: String, deliver: @escaping @Sendable (RealtimeBroadcast) async -> Void) async throws {
        let consumer = try KafkaConsumer(configuration: consumer, topics: [topic], logger: logger)
        let own = Array(Self.key(origin: origin).utf8)
        do {
            for try await message in consumer.messages {
                if let key = message.key, key.starts(with: own) { continue }
                do {
                    await deliver(try ContractCoding.decode(RealtimeBroadcast.self, from: message.value))
                } catch {
                    logger.warning("skipping an unreadable broadcast", metadata: ["error": "\(error)"])
                }
            }
        } catch {
            await consumer.close()
            throw error
        }
        await consumer.close()
    }
}
