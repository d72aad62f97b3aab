import CRdKafka
import Foundation
import Logging

/// One message as consumed: copied out of librdkafka, so it outlives the poll.
package struct KafkaMessage: Sendable {
    package var topic: String
    package var partition: Int32
    package var offset: Int64
    package var key: Data?
    package var value: Data
    /// The record's timestamp (the producer's create time unless the topic says otherwise), if it has one.
    package var timestamp: Date?
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
/// One thread of its own polls librdkafka (only while a message is wanted) and runs the commits, so nothing
/// here blocks Swift's cooperative pool or GCD's queues. Cancelling the iterating task ends the sequence within
/// about 100 ms; a message polled meanwhile is kept for the next iteration, never dropped.
package final class KafkaConsumer: Sendable {
    private let client: RDKafkaClient
    private let logger: Logger
    private let loop: ConsumerLoop
    private let closeTimeout: Duration
    package let groupId: String
    /// Where a consumer made by ``reading(_:since:configuration:logger:)`` was assigned in each partition: the
    /// search's answer, at or before the first record it delivers there (empty for a group member).
    package let startOffsets: [KafkaTopicPartition: Int64]

    /// Creates the consumer and subscribes; joining the group happens in the background while polling.
    package convenience init(configuration: KafkaConsumerConfiguration, topics: [String], logger: Logger) throws {
        try self.init(configuration: configuration, logger: logger)
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

    /// Creates a consumer that joins no group and reads every partition of `topics` from its first record stamped at
    /// or after `since` (from its end where none is): for a reader each instance runs for itself, which commits
    /// nothing and must not miss what happened while it was starting. Waits for the broker to know the topics.
    package static func reading(
        _ topics: [String], since: Date, configuration: KafkaConsumerConfiguration, logger: Logger
    ) async throws -> KafkaConsumer {
        // In whole milliseconds, as the broker stamps records.
        let milliseconds = Int64((since.timeIntervalSince1970 * 1000).rounded(.down))
        var starts: [KafkaTopicPartition: Range<Int64>]
        while true {
            do {
                // The search reads records on a handle of its own, destroyed before the reader is assigned: records
                // librdkafka fetched for a probe would otherwise reach the reader ahead of its start (seen in CI: a
                // reader from record 1,194 got 1,181 first).
                let probe = try RDKafkaClient(kind: .consumer, properties: configuration.properties, logger: logger)
                rd_kafka_poll_set_consumer(probe.handle)
                starts = try await runBlocking { () throws(KafkaError) -> [KafkaTopicPartition: Range<Int64>] in
                    try TimeStart.locate(
                        topics, since: milliseconds, client: probe, timeout: .seconds(5), logger: logger)
                }
                break
            } catch let error as KafkaError where error.isRetriable {
                logger.warning(
                    "could not locate where to start reading; trying again in 1 s", metadata: ["error": "\(error)"])
                try await Task.sleep(for: .seconds(1))
            }
        }
        let offsets = starts.mapValues(\.lowerBound)
        let consumer = try KafkaConsumer(
            configuration: configuration, logger: logger, startOffsets: offsets,
            recordsBeforeTime: RecordsBeforeTime(milliseconds: milliseconds, starts: starts))
        try assignPartitions(offsets, client: consumer.client)
        logger.info(
            "reading from a time, from these offsets on (records before the time skipped)",
            metadata: ["kafka.topics": "\(topics)", "kafka.offsets": "\(offsets)"])
        return consumer
    }

    private init(
        configuration: KafkaConsumerConfiguration, logger: Logger, startOffsets: [KafkaTopicPartition: Int64] = [:],
        recordsBeforeTime: RecordsBeforeTime? = nil
    ) throws {
        self.startOffsets = startOffsets
        self.client = try RDKafkaClient(kind: .consumer, properties: configuration.properties, logger: logger)
        self.groupId = configuration.groupId
        self.logger = logger
        rd_kafka_poll_set_consumer(client.handle)
        self.loop = ConsumerLoop(
            client: client, groupId: configuration.groupId, logger: logger, recordsBeforeTime: recordsBeforeTime)
        self.closeTimeout = configuration.closeTimeout
    }

    deinit { loop.stop() }

    /// The messages of the subscribed topics, in order per partition. Ends when the task is cancelled or the
    /// consumer is closed; throws on an error the consumer cannot continue after.
    package var messages: Messages { Messages(consumer: self) }

    /// The same messages in batches of 1 to `limit`: each waits for one message, then takes what librdkafka has
    /// already fetched behind it, without waiting for more. For effects cheaper applied several at a time.
    package func batches(limit: Int) -> Batches { Batches(consumer: self, limit: max(limit, 1)) }

    /// Commits `message` (and everything before it in its partition) for the group; waits for the broker.
    /// - Throws: ``KafkaError`` `.commitFailed`, e.g. after the partition moved to another member (the message
    ///   will be delivered again there).
    /// - Parameter waitForBroker: false sends the commit without waiting for the broker's answer (a failure is
    ///   logged): for consumers whose effects are idempotent, where a lost commit only means a redelivery.
    package func commit(_ message: KafkaMessage, waitForBroker: Bool = true) async throws {
        try await commit(
            [KafkaTopicPartition(topic: message.topic, partition: message.partition): message.offset],
            waitForBroker: waitForBroker)
    }

    /// Commits the given last-processed offsets.
    package func commit(_ offsets: [KafkaTopicPartition: Int64], waitForBroker: Bool = true) async throws {
        try await loop.commit(offsets, waitForBroker: waitForBroker)
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

    /// Stops consuming and leaves the group (handing partitions over). Returns once the broker confirmed, or after
    /// the configuration's `closeTimeout` with the close still going on in the background (logged). Idempotent.
    package func close() async {
        let confirmed = await loop.close(within: closeTimeout)
        if !confirmed {
            logger.warning(
                "the broker did not confirm leaving the group in time; closing in the background",
                metadata: ["kafka.group": "\(groupId)", "timeout": "\(closeTimeout)"]
            )
        }
    }

    /// The consumer's messages as an `AsyncSequence`.
    package struct Messages: AsyncSequence, Sendable {
        package typealias Element = KafkaMessage
        let consumer: KafkaConsumer

        package func makeAsyncIterator() -> Iterator { Iterator(consumer: consumer) }

        package struct Iterator: AsyncIteratorProtocol {
            let consumer: KafkaConsumer

            package mutating func next() async throws -> KafkaMessage? {
                try await consumer.loop.next(limit: 1).first
            }
        }
    }

    /// The consumer's messages in batches, as an `AsyncSequence`.
    package struct Batches: AsyncSequence, Sendable {
        package typealias Element = [KafkaMessage]
        let consumer: KafkaConsumer
        let limit: Int

        package func makeAsyncIterator() -> Iterator { Iterator(consumer: consumer, limit: limit) }

        package struct Iterator: AsyncIteratorProtocol {
            let consumer: KafkaConsumer
            let limit: Int

            package mutating func next() async throws -> [KafkaMessage]? {
                let batch = try await consumer.loop.next(limit: limit)
                return batch.isEmpty ? nil : batch
            }
        }
    }
}

/// Has the consumer read exactly these partitions from these offsets, replacing what it read before.
func assignPartitions(_ offsets: [KafkaTopicPartition: Int64], client: RDKafkaClient) throws(KafkaError) {
    let list = rd_kafka_topic_partition_list_new(Int32(offsets.count))
    defer { rd_kafka_topic_partition_list_destroy(list) }
    for (partition, offset) in offsets {
        rd_kafka_topic_partition_list_add(list, partition.topic, partition.partition)?.pointee.offset = offset
    }
    let code = rd_kafka_assign(client.handle, list)
    guard code == RD_KAFKA_RESP_ERR_NO_ERROR else {
        throw KafkaError(
            .consumerFailed, code: code.rawValue,
            message: "assign \(offsets) failed: \(String(cString: rd_kafka_err2str(code)))")
    }
}
