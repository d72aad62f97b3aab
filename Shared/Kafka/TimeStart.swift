import CRdKafka
import Foundation
import Logging

/// Where a consumer reading from a time starts in each partition.
enum TimeStart {
    /// Asks the broker for the partitions of `topics` and, in each, the first offset stamped at or after `since`.
    /// The broker's own answer (ListOffsets by time) is only a hint, checked by reading the records around it:
    /// Tansu 0.6 answers the first offset for any time it does not find in its recent index (measured: 0 for times
    /// in the first half of a 1,200-record log). A wrong hint is replaced by a binary search on the records' own
    /// timestamps, about 20 reads for a million records. Runs on a handle that nothing else polls.
    static func locate(
        _ topics: [String], since: Date, client: RDKafkaClient, timeout: Duration, logger: Logger
    ) throws(KafkaError) -> [KafkaTopicPartition: Int64] {
        let partitions = try Self.partitions(of: topics, client: client, timeout: timeout)
        let sinceMilliseconds = Int64((since.timeIntervalSince1970 * 1000).rounded())
        let hints = try Self.hints(for: partitions, at: sinceMilliseconds, client: client, timeout: timeout)
        var offsets: [KafkaTopicPartition: Int64] = [:]
        for partition in partitions {
            var low: Int64 = 0
            var high: Int64 = 0
            let code = rd_kafka_query_watermark_offsets(
                client.handle, partition.topic, partition.partition, &low, &high, Int32(timeout.milliseconds))
            guard code == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(
                    .brokerUnavailable, code: code.rawValue,
                    message: "the end of \(partition): \(String(cString: rd_kafka_err2str(code)))", isRetriable: true)
            }
            let reader = RecordStamps(partition: partition, client: client, timeout: timeout, logger: logger)
            offsets[partition] = try reader.firstOffset(
                atOrAfter: sinceMilliseconds, in: low..<high, hint: hints[partition])
        }
        return offsets
    }

    private static func partitions(
        of topics: [String], client: RDKafkaClient, timeout: Duration
    ) throws(KafkaError) -> [KafkaTopicPartition] {
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let code = rd_kafka_metadata(client.handle, 1, nil, &metadata, Int32(timeout.milliseconds))
        guard code == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
            throw KafkaError(
                .brokerUnavailable, code: code.rawValue,
                message: "metadata from \(client.context.brokers): \(String(cString: rd_kafka_err2str(code)))",
                isRetriable: true)
        }
        defer { rd_kafka_metadata_destroy(metadata) }
        var partitions: [KafkaTopicPartition] = []
        for topic in topics {
            let known = (0..<Int(metadata.pointee.topic_cnt)).map { metadata.pointee.topics[$0] }
                .first { String(cString: $0.topic) == topic }
            guard let known, known.err == RD_KAFKA_RESP_ERR_NO_ERROR, known.partition_cnt > 0 else {
                throw KafkaError(
                    .brokerUnavailable, message: "the broker does not know \(topic) yet", isRetriable: true)
            }
            partitions += (0..<Int(known.partition_cnt)).map {
                KafkaTopicPartition(topic: topic, partition: known.partitions[$0].id)
            }
        }
        return partitions
    }

    /// The broker's answers to "the first offset at or after this time" (none where it knows no such record).
    private static func hints(
        for partitions: [KafkaTopicPartition], at milliseconds: Int64, client: RDKafkaClient, timeout: Duration
    ) throws(KafkaError) -> [KafkaTopicPartition: Int64] {
        guard let list = rd_kafka_topic_partition_list_new(Int32(partitions.count)) else {
            throw KafkaError(.consumerFailed, message: "could not allocate a partition list")
        }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for partition in partitions {
            rd_kafka_topic_partition_list_add(list, partition.topic, partition.partition)?.pointee.offset = milliseconds
        }
        let code = rd_kafka_offsets_for_times(client.handle, list, Int32(timeout.milliseconds))
        guard code == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(
                .brokerUnavailable, code: code.rawValue,
                message: "offsets by time: \(String(cString: rd_kafka_err2str(code)))", isRetriable: true)
        }
        var hints: [KafkaTopicPartition: Int64] = [:]
        for index in 0..<Int(list.pointee.cnt) {
            let element = list.pointee.elems[index]
            guard element.err == RD_KAFKA_RESP_ERR_NO_ERROR, element.offset >= 0 else { continue }
            hints[KafkaTopicPartition(topic: String(cString: element.topic), partition: element.partition)] =
                element.offset
        }
        return hints
    }
}

/// Reads single records of one partition to learn their timestamps (by assigning the consumer at an offset).
private struct RecordStamps {
    let partition: KafkaTopicPartition
    let client: RDKafkaClient
    let timeout: Duration
    let logger: Logger

    /// The first offset in `range` whose record is stamped at or after `milliseconds` (`range.upperBound` if none
    /// is), checking `hint` first. A record that cannot be read (seen on Tansu under load: a fetch that returned
    /// nothing for minutes) makes it answer the range's start instead: reading more than needed, never less.
    func firstOffset(atOrAfter milliseconds: Int64, in range: Range<Int64>, hint: Int64?) throws(KafkaError) -> Int64 {
        do {
            return try verifiedSearch(atOrAfter: milliseconds, in: range, hint: hint)
        } catch let error where error.kind == .brokerUnavailable {
            logger.warning(
                "could not read the records' timestamps; reading the partition from its first offset",
                metadata: ["kafka.partition": "\(partition)", "error": "\(error)"])
            return range.lowerBound
        }
    }

    /// The search's answer once the records on both sides of it, each read at exactly its offset, show it is the
    /// boundary. A read that took a later record (the exact one did not come within ``exactGrace``: a gap, or a
    /// loaded broker while records fetched for an earlier read were still queued, seen in CI as a reader from the
    /// stamp of record 1,199 beginning at 1,181) can move the answer too early; the search then runs again, three
    /// times at most, and the earliest answer is kept: reading more than needed, never less.
    private func verifiedSearch(atOrAfter milliseconds: Int64, in range: Range<Int64>, hint: Int64?)
        throws(KafkaError) -> Int64
    {
        var earliest = range.upperBound
        for pass in 0..<3 {
            let answer = try search(atOrAfter: milliseconds, in: range, hint: pass == 0 ? hint : nil)
            earliest = min(earliest, answer)
            if try isBoundary(answer, of: milliseconds, in: range) { return answer }
        }
        logger.warning(
            "could not confirm where the records' timestamps reach the time; reading from the earliest answer",
            metadata: ["kafka.partition": "\(partition)", "kafka.offset": "\(earliest)"])
        return earliest
    }

    /// Whether `offset` is the first in `range` stamped at or after `milliseconds`, by exact reads of it and the
    /// record before it.
    private func isBoundary(_ offset: Int64, of milliseconds: Int64, in range: Range<Int64>) throws(KafkaError) -> Bool
    {
        if offset > range.lowerBound {
            let before = try record(atOrAfter: offset - 1)
            guard before.offset == offset - 1, before.stamp < milliseconds else { return false }
        }
        guard offset < range.upperBound else { return true }
        let at = try record(atOrAfter: offset)
        return at.offset == offset && at.stamp >= milliseconds
    }

    private func search(atOrAfter milliseconds: Int64, in range: Range<Int64>, hint: Int64?) throws(KafkaError)
        -> Int64
    {
        guard !range.isEmpty else { return range.upperBound }
        var low = range.lowerBound
        var high = range.upperBound
        // The last record first: a reader from "now" finds everything older at once.
        if try record(atOrAfter: high - 1).stamp < milliseconds { return high }
        if let hint, range.contains(hint) {
            let found = try record(atOrAfter: hint)
            if found.stamp >= milliseconds {
                if hint == low { return hint }
                if try record(atOrAfter: hint - 1).stamp < milliseconds { return hint }
                high = hint
            } else {
                low = found.offset + 1
            }
        }
        while low < high {
            let middle = low + (high - low) / 2
            let found = try record(atOrAfter: middle)
            if found.stamp < milliseconds {
                low = found.offset + 1
            } else {
                high = middle
            }
        }
        return low
    }

    /// How long a read waits for the record at exactly its offset before it takes the first one after it (a log
    /// with a gap there: compacted, or a transaction's marker).
    private static let exactGrace = Duration.seconds(1)

    /// The offset and timestamp (milliseconds; -1 if it has none) of the first record at or after `offset`.
    ///
    /// The record at `offset` itself is waited for: after a new assignment, records fetched for the one before can
    /// still come out of the queue, and one of those further on, taken for the first, made the search conclude too
    /// early (seen in CI: a reader from record 1,186 began at 1,181).
    private func record(atOrAfter offset: Int64) throws(KafkaError) -> (offset: Int64, stamp: Int64) {
        try assignPartitions([partition: offset], client: client)
        let start = ContinuousClock.now
        let deadline = start + timeout
        var lastError = "none"
        var later: (offset: Int64, stamp: Int64)?
        while ContinuousClock.now < deadline {
            if let later, ContinuousClock.now - start >= Self.exactGrace { return later }
            guard let message = rd_kafka_consumer_poll(client.handle, 100) else { continue }
            defer { rd_kafka_message_destroy(message) }
            let pointee = message.pointee
            if pointee.err != RD_KAFKA_RESP_ERR_NO_ERROR { lastError = String(cString: rd_kafka_err2str(pointee.err)) }
            guard pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR, pointee.partition == partition.partition,
                pointee.offset >= offset
            else { continue }
            var type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
            let found = (offset: pointee.offset, stamp: rd_kafka_message_timestamp(message, &type))
            if found.offset == offset { return found }
            if found.offset < later?.offset ?? .max { later = found }
        }
        if let later { return later }
        throw KafkaError(
            .brokerUnavailable,
            message: "no record of \(partition) at \(offset) within \(timeout) (last error seen: \(lastError))",
            isRetriable: true)
    }
}
