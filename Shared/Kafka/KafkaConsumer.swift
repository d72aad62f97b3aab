import CRdKafka
import Dispatch
import Foundation
import Logging
import Synchronization

/// One message as consumed: copied out of librdkafka, so it outlives the poll.
package struct KafkaMessage: Sendable {
    package var topic: String
    package var partition: Int32
    package var offset: Int64
    package var key: Data?
    package var value: Data
    /// The key as UTF-8 text, if it is.
    package var keyString: String? { key.flatMap { String(data: $0, encoding: .utf8) } }
}

/// A topic and partition, e.g. in a consumer's assignment.
package struct KafkaTopicPartition: Hashable, Sendable, CustomStringConvertible {
    package var topic: String
    package var partition: Int32
    package init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }
    package var description: String { "\(topic)[\(partition)]" }
}

/// A consumer-group member. Read ``messages`` and ``commit(_:)`` each message once its effect is committed:
/// at-least-once delivery, so effects must be idempotent.
///
/// Polling happens on the consumer's own dispatch queue (after a non-blocking attempt), so iterating never
/// blocks Swift's cooperative pool; cancelling the iterating task ends the sequence within about 100 ms.
package final class KafkaConsumer: Sendable {
    private let client: RDKafkaClient
    private let queue: DispatchQueue
    private let logger: Logger
    private let isClosed = Atomic<Bool>(false)
    package let groupId: String

    /// Creates the consumer and subscribes; joining the group happens in the background while polling.
    package init(configuration: KafkaConsumerConfiguration, topics: [String], logger: Logger) throws {
        self.client = try RDKafkaClient(kind: .consumer, properties: configuration.properties, logger: logger)
        self.groupId = configuration.groupId
        self.logger = logger
        self.queue = DispatchQueue(label: "librdkafka-consumer-\(configuration.groupId)")
        rd_kafka_poll_set_consumer(client.handle)
        let list = rd_kafka_topic_partition_list_new(Int32(topics.count))
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for topic in topics {
            rd_kafka_topic_partition_list_add(list, topic, RD_KAFKA_PARTITION_UA)
        }
        let code = rd_kafka_subscribe(client.handle, list)
        guard code == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(
                .consumerFailed, code: code.rawValue,
                message: "subscribe to \(topics) failed: \(String(cString: rd_kafka_err2str(code)))"
            )
        }
    }

    /// The messages of the subscribed topics, in order per partition. Ends when the task is cancelled or the
    /// consumer is closed; throws on an error the consumer cannot continue after.
    package var messages: Messages { Messages(consumer: self) }

    /// Commits `message` (and everything before it in its partition) for the group; waits for the broker.
    /// - Throws: ``KafkaError`` `.commitFailed`, e.g. after the partition moved to another member (the message
    ///   will be delivered again there).
    package func commit(_ message: KafkaMessage) async throws {
        try await commit([KafkaTopicPartition(topic: message.topic, partition: message.partition): message.offset])
    }

    /// Commits the given last-processed offsets.
    package func commit(_ offsets: [KafkaTopicPartition: Int64]) async throws {
        guard !isClosed.load(ordering: .acquiring) else {
            throw KafkaError(.closed, message: "the consumer is closed")
        }
        let client = self.client
        try await runBlocking {
            let list = rd_kafka_topic_partition_list_new(Int32(offsets.count))
            defer { rd_kafka_topic_partition_list_destroy(list) }
            for (partition, offset) in offsets {
                rd_kafka_topic_partition_list_add(list, partition.topic, partition.partition)?.pointee.offset =
                    offset + 1
            }
            let code = rd_kafka_commit(client.handle, list, 0)
            guard code == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(
                    .commitFailed, code: code.rawValue, message: String(cString: rd_kafka_err2str(code)),
                    isRetriable: true
                )
            }
        }
    }

    /// The partitions currently assigned to this member.
    package func assignment() -> Set<KafkaTopicPartition> {
        var list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        guard rd_kafka_assignment(client.handle, &list) == RD_KAFKA_RESP_ERR_NO_ERROR, let list else { return [] }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        var result = Set<KafkaTopicPartition>()
        for index in 0..<Int(list.pointee.cnt) {
            let element = list.pointee.elems[index]
            result.insert(KafkaTopicPartition(topic: String(cString: element.topic), partition: element.partition))
        }
        return result
    }

    /// Leaves the group (handing partitions over) and stops consuming. Idempotent.
    package func close() async {
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let client = self.client
        _ = try? await runBlocking(on: queue) { rd_kafka_consumer_close(client.handle) }
    }

    /// One poll. `timeout` 0 never blocks; otherwise call it on `queue`.
    fileprivate func poll(timeoutMilliseconds: Int32) throws -> KafkaMessage? {
        guard !isClosed.load(ordering: .acquiring) else { return nil }
        guard let message = rd_kafka_consumer_poll(client.handle, timeoutMilliseconds) else { return nil }
        defer { rd_kafka_message_destroy(message) }
        let pointee = message.pointee
        guard pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            let text =
                pointee.len > 0 && pointee.payload != nil
                ? String(
                    decoding: UnsafeRawBufferPointer(start: pointee.payload, count: pointee.len), as: UTF8.self
                ) : String(cString: rd_kafka_err2str(pointee.err))
            if pointee.err == RD_KAFKA_RESP_ERR__FATAL {
                throw KafkaError(.consumerFailed, code: pointee.err.rawValue, message: text)
            }
            logger.warning("Kafka consumer error", metadata: ["kafka.error": "\(text)", "kafka.group": "\(groupId)"])
            return nil
        }
        let value = pointee.payload.map { Data(bytes: $0, count: pointee.len) } ?? Data()
        let key = pointee.key.map { Data(bytes: $0, count: pointee.key_len) }
        let topic = pointee.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
        return KafkaMessage(topic: topic, partition: pointee.partition, offset: pointee.offset, key: key, value: value)
    }

    /// The consumer's messages as an `AsyncSequence`.
    package struct Messages: AsyncSequence, Sendable {
        package typealias Element = KafkaMessage
        let consumer: KafkaConsumer

        package func makeAsyncIterator() -> Iterator { Iterator(consumer: consumer) }

        package struct Iterator: AsyncIteratorProtocol {
            let consumer: KafkaConsumer

            package mutating func next() async throws -> KafkaMessage? {
                while !Task.isCancelled, !consumer.isClosed.load(ordering: .acquiring) {
                    if let message = try consumer.poll(timeoutMilliseconds: 0) { return message }
                    let consumer = self.consumer
                    if let message = try await runBlocking(on: consumer.queue, { [consumer] in
                        try consumer.poll(timeoutMilliseconds: 100)
                    }) {
                        return message
                    }
                }
                return nil
            }
        }
    }
}
