import Contracts
import Foundation
import Kafka
import Logging

/// An emit to rooms of a namespace, as sent to the other instances of a service.
package struct RealtimeBroadcast: Codable, Sendable, Equatable {
    /// The instance that emitted it (which already delivered it locally).
    package var origin: String
    package var namespace: String
    package var rooms: [String]
    /// Socket ids left out.
    package var except: [String]
    /// The encoded Socket.IO packet.
    package var packet: String
    /// Its binary attachments, base64.
    package var attachments: [String]
    /// Set for emits of which only the latest matters: a pending one with the same key is replaced.
    package var latestKey: String?
}

/// Carries broadcasts between the instances of a service, so an emit to a room reaches sockets held by any
/// instance.
package protocol RealtimeAdapter: Sendable {
    /// Hands a broadcast to the other instances.
    func publish(_ broadcast: RealtimeBroadcast) async throws
    /// Receives the broadcasts of the other instances (not those of `origin`, this one) until cancelled.
    func run(origin: String, deliver: @escaping @Sendable (RealtimeBroadcast) async -> Void) async throws
}

/// The Kafka-backed adapter: every instance publishes to one topic and consumes all of it under a consumer
/// group of its own (so each instance sees every broadcast), starting from the latest offset.
package struct KafkaRealtimeAdapter: RealtimeAdapter {
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
