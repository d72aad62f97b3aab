import CRdKafka
import Foundation
import Logging
import Synchronization

/// Where a consumer reading from a time starts in each partition.
enum TimeStart {
    /// Asks the broker for the partitions of `topics` and, in each, an offset no later than the first record stamped
    /// at or after `since`, with the log's end at the time of asking (the records from that offset to that end are
    /// the ones a ``RecordsBeforeTime`` checks; the broker's answer for the end is checked by a fetch). The broker's
    /// own answer (ListOffsets by time) is only a hint, checked by reading the records around it: Tansu 0.6 answers
    /// the first offset of a batch, or of the log for any time it does not find in its recent index (measured: 0 for
    /// times in the first half of a 1,200-record log). A binary search on the records' own timestamps follows, about
    /// 20 reads for a million records. A read that took a later record than the one asked for can only move the
    /// answer earlier, never later. Runs on a handle that nothing else polls.
    static func locate(
        _ topics: [String], since sinceMilliseconds: Int64, client: RDKafkaClient, timeout: Duration, logger: Logger
    ) throws(KafkaError) -> [KafkaTopicPartition: Range<Int64>] {
        let partitions = try Self.partitions(of: topics, client: client, timeout: timeout)
        let hints = try Self.hints(for: partitions, at: sinceMilliseconds, client: client, timeout: timeout)
        var starts: [KafkaTopicPartition: Range<Int64>] = [:]
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
            let end = reader.end(reported: high, start: low)
            let start = try reader.firstOffset(atOrAfter: sinceMilliseconds, in: low..<end, hint: hints[partition])
            starts[partition] = start..<end
        }
        return starts
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

    /// The log's end: the broker's answer to ListOffsets (`reported`), or the high watermark of the fetch that
    /// reads the record before it where that is later. Tansu 0.6 answers ListOffsets with the last batch's first
    /// offset + 1 (measured: 81 for a log of five 20-record batches, whose fetches say 100), which would leave the
    /// rest of that batch unchecked by ``RecordsBeforeTime`` and deliver it to a reader from now. A record that
    /// cannot be read leaves the broker's answer.
    func end(reported: Int64, start: Int64) -> Int64 {
        guard reported > start else { return reported }
        do {
            _ = try record(atOrAfter: reported - 1)
        } catch {
            logger.warning(
                "could not read the last record to check the log's end; taking the broker's answer",
                metadata: ["kafka.partition": "\(partition)", "kafka.end": "\(reported)", "error": "\(error)"])
            return reported
        }
        var low: Int64 = 0
        var fetched: Int64 = 0
        let code = rd_kafka_get_watermark_offsets(client.handle, partition.topic, partition.partition, &low, &fetched)
        return code == RD_KAFKA_RESP_ERR_NO_ERROR ? max(reported, fetched) : reported
    }

    /// An offset in `range` no later than the first whose record is stamped at or after `milliseconds`
    /// (`range.upperBound` if none is), checking `hint` first. A record that cannot be read (seen on Tansu under
    /// load: a fetch that returned nothing for minutes) makes it answer the range's start instead: reading more than
    /// needed, never less.
    func firstOffset(atOrAfter milliseconds: Int64, in range: Range<Int64>, hint: Int64?) throws(KafkaError) -> Int64 {
        do {
            return try search(atOrAfter: milliseconds, in: range, hint: hint)
        } catch let error where error.kind == .brokerUnavailable {
            logger.warning(
                "could not read the records' timestamps; reading the partition from its first offset",
                metadata: ["kafka.partition": "\(partition)", "error": "\(error)"])
            return range.lowerBound
        }
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
    /// still come out of the queue, and one of those further on, taken for the first, moves the search's answer
    /// earlier than needed (which the reader's ``RecordsBeforeTime`` corrects, at the cost of reading more).
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

/// Drops what a reader from a time gets, in each partition, before its first record stamped at or after the time.
///
/// The start ``TimeStart`` finds is never later than that record but can be earlier: its reads rely on librdkafka
/// delivering the record asked for within a grace period, and under load they took later ones (seen in CI: a reader
/// from the stamp of record 1,199 of a 1,200-record log began at 1,181, again after each of three fixes to the
/// search).
/// Only records that were in the log when the search ran are checked: one written since then is new to the reader,
/// whatever its stamp (a producer's clock can lag).
package final class RecordsBeforeTime: Sendable {
    private let milliseconds: Int64
    /// Per partition still being checked, the log's end when the search ran.
    private let unchecked: Mutex<[KafkaTopicPartition: Int64]>

    /// Checks, in each partition, the records of `starts` (from the search's answer to the log's end then) against
    /// `milliseconds`.
    package init(milliseconds: Int64, starts: [KafkaTopicPartition: Range<Int64>]) {
        self.milliseconds = milliseconds
        self.unchecked = Mutex(starts.filter { !$0.value.isEmpty }.mapValues(\.upperBound))
    }

    /// Whether the record at `offset` of `partition`, stamped `stamp` (-1 if it has none), reaches the reader. The
    /// first one that does ends the partition's check.
    package func admits(_ partition: KafkaTopicPartition, offset: Int64, stamp: Int64) -> Bool {
        unchecked.withLock { unchecked in
            guard let end = unchecked[partition] else { return true }
            if offset < end, stamp >= 0, stamp < milliseconds { return false }
            unchecked[partition] = nil
            return true
        }
    }
}
