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
    /// Where a consumer made by ``reading(_:since:configuration:logger:)`` began in each partition (empty for a
    /// group member).
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
        let since = Date(timeIntervalSince1970: (since.timeIntervalSince1970 * 1000).rounded(.down) / 1000)
        var offsets: [KafkaTopicPartition: Int64]
        while true {
            do {
                // The search reads records on a handle of its own, destroyed before the reader is assigned: records
                // librdkafka fetched for a probe would otherwise reach the reader ahead of its start (seen in CI: a
                // reader from record 1,194 got 1,181 first).
                let probe = try RDKafkaClient(kind: .consumer, properties: configuration.properties, logger: logger)
                rd_kafka_poll_set_consumer(probe.handle)
                offsets = try await runBlocking { () throws(KafkaError) -> [KafkaTopicPartition: Int64] in
                    try TimeStart.locate(topics, since: since, client: probe, timeout: .seconds(5), logger: logger)
                }
                break
            } catch let error as KafkaError where error.isRetriable {
                logger.warning(
                    "could not locate where to start reading; trying again in 1 s", metadata: ["error": "\(error)"])
                try await Task.sleep(for: .seconds(1))
            }
        }
        let consumer = try KafkaConsumer(configuration: configuration, logger: logger, startOffsets: offsets)
        try assignPartitions(offsets, client: consumer.client)
        logger.info(
            "reading from a time", metadata: ["kafka.topics": "\(topics)", "kafka.offsets": "\(offsets)"])
        return consumer
    }

    private init(
        configuration: KafkaConsumerConfiguration, logger: Logger, startOffsets: [KafkaTopicPartition: Int64] = [:]
    ) throws {
        self.startOffsets = startOffsets
        self.client = try RDKafkaClient(kind: .consumer, properties: configuration.properties, logger: logger)
        self.groupId = configuration.groupId
        self.logger = logger
        rd_kafka_poll_set_consumer(client.handle)
        self.loop = ConsumerLoop(client: client, groupId: configuration.groupId, logger: logger)
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
private func assignPartitions(_ offsets: [KafkaTopicPartition: Int64], client: RDKafkaClient) throws(KafkaError) {
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

/// Where a consumer reading from a time starts in each partition.
private enum TimeStart {
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

/// The consumer's own thread: polls while a message is wanted, runs commits between polls, closes.
private final class ConsumerLoop: Sendable {
    private enum Command: Sendable {
        case commit([KafkaTopicPartition: Int64], waitForBroker: Bool, CheckedContinuation<Void, any Error>)
        case close
    }

    private typealias Waiter = CheckedContinuation<Result<[KafkaMessage], KafkaError>, Never>

    private struct State: Sendable {
        var waiter: Waiter?
        /// How many messages the waiter takes at most.
        var limit = 1
        /// Messages polled after their waiter went away, or past its limit; the next `next()` gets them first.
        var stash: [KafkaMessage] = []
        /// An error polled behind a batch's messages; the next `next()` gets it once the stash is empty.
        var stashedError: KafkaError?
        var commands: [Command] = []
        var closed = false
        /// librdkafka's close returned: the group was left.
        var closeFinished = false
        var closeWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextCloseWaiter = 0
        var stopped = false
    }

    private let client: RDKafkaClient
    private let groupId: String
    private let logger: Logger
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)

    init(client: RDKafkaClient, groupId: String, logger: Logger) {
        self.client = client
        self.groupId = groupId
        self.logger = logger
        let thread = Thread { [self] in run() }
        thread.name = "librdkafka-consumer"
        thread.start()
    }

    /// The next 1 to `limit` messages, waiting for the first; none once closed or cancelled.
    func next(limit: Int) async throws -> [KafkaMessage] {
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: Waiter) in
                let immediate = state.withLock { state -> Result<[KafkaMessage], KafkaError>? in
                    if state.closed || Task.isCancelled { return .success([]) }
                    if !state.stash.isEmpty {
                        let count = min(limit, state.stash.count)
                        defer { state.stash.removeFirst(count) }
                        return .success(Array(state.stash.prefix(count)))
                    }
                    if let error = state.stashedError {
                        state.stashedError = nil
                        return .failure(error)
                    }
                    state.waiter = continuation
                    state.limit = limit
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) } else { wake.signal() }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: .success([]))
        }
        return try result.get()
    }

    func commit(_ offsets: [KafkaTopicPartition: Int64], waitForBroker: Bool) async throws {
        try await withCheckedThrowingContinuation { continuation in
            let accepted = state.withLock { state -> Bool in
                guard !state.closed else { return false }
                state.commands.append(.commit(offsets, waitForBroker: waitForBroker, continuation))
                return true
            }
            if accepted {
                wake.signal()
            } else {
                continuation.resume(throwing: KafkaError(.closed, message: "the consumer is closed"))
            }
        }
    }

    /// Asks the thread to close the consumer; true once librdkafka's close returned, false after `timeout`.
    func close(within timeout: Duration) async -> Bool {
        let (accepted, waiter) = state.withLock { state -> (Bool, Waiter?) in
            guard !state.closed else { return (false, nil) }
            state.closed = true
            state.commands.append(.close)
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        waiter?.resume(returning: .success([]))
        if accepted { wake.signal() }
        // Waits even in a cancelled task: closing is clean-up, and `timeout` bounds it.
        await withCheckedContinuation { continuation in
            let waiter = state.withLock { state -> Int? in
                if state.closeFinished { return nil }
                defer { state.nextCloseWaiter += 1 }
                state.closeWaiters[state.nextCloseWaiter] = continuation
                return state.nextCloseWaiter
            }
            guard let id = waiter else { return continuation.resume() }
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(timeout.milliseconds))) {
                self.state.withLock { $0.closeWaiters.removeValue(forKey: id) }?.resume()
            }
        }
        return state.withLock { $0.closeFinished }
    }

    /// Ends the thread without leaving the group cleanly (the handle's destruction does that).
    func stop() {
        state.withLock { $0.stopped = true }
        wake.signal()
    }

    private func run() {
        while true {
            let (commands, wantsMessage, stopped) = state.withLock { state in
                defer { state.commands.removeAll() }
                let ready = state.stash.isEmpty && state.stashedError == nil
                return (state.commands, state.waiter != nil && ready, state.stopped)
            }
            for command in commands {
                switch command {
                case .commit(let offsets, let waitForBroker, let continuation):
                    continuation.resume(with: Result { try commitNow(offsets, waitForBroker: waitForBroker) })
                case .close:
                    rd_kafka_consumer_close(client.handle)
                    failPendingCommands()
                    let waiters = state.withLock { state in
                        state.closeFinished = true
                        defer { state.closeWaiters.removeAll() }
                        return Array(state.closeWaiters.values)
                    }
                    for waiter in waiters { waiter.resume() }
                    return
                }
            }
            if stopped { return }
            guard wantsMessage else {
                _ = wake.wait(timeout: .now() + .milliseconds(100))
                continue
            }
            let polled: Result<[KafkaMessage], KafkaError>
            do {
                polled = .success(try pollBatch())
            } catch {
                polled = .failure(error)
            }
            if case .success(let batch) = polled, batch.isEmpty { continue }
            let (waiter, answer) = state.withLock { state -> (Waiter?, Result<[KafkaMessage], KafkaError>) in
                guard case .success(let batch) = polled else {
                    defer { state.waiter = nil }
                    return (state.waiter, polled)
                }
                // The waiter may have changed since the poll began: it gets no more than its own limit.
                let count = state.waiter == nil ? 0 : min(state.limit, batch.count)
                state.stash.append(contentsOf: batch.dropFirst(count))
                defer { state.waiter = nil }
                return (state.waiter, .success(Array(batch.prefix(count))))
            }
            waiter?.resume(returning: answer)
        }
    }

    /// Waits up to 100 ms for a message, then takes those already fetched behind it, up to the waiter's limit. An
    /// error behind them is kept for the next `next()`: librdkafka reports a fatal one only once.
    private func pollBatch() throws(KafkaError) -> [KafkaMessage] {
        guard let first = try poll(timeoutMilliseconds: 100) else { return [] }
        let limit = state.withLock { $0.limit }
        var batch = [first]
        do {
            while batch.count < limit, let message = try poll(timeoutMilliseconds: 0) {
                batch.append(message)
            }
        } catch {
            state.withLock { $0.stashedError = error }
        }
        return batch
    }

    private func failPendingCommands() {
        let commands = state.withLock { state in
            defer { state.commands.removeAll() }
            return state.commands
        }
        for case .commit(_, _, let continuation) in commands {
            continuation.resume(throwing: KafkaError(.closed, message: "the consumer is closed"))
        }
    }

    private func commitNow(_ offsets: [KafkaTopicPartition: Int64], waitForBroker: Bool) throws(KafkaError) {
        let list = rd_kafka_topic_partition_list_new(Int32(offsets.count))
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for (partition, offset) in offsets {
            rd_kafka_topic_partition_list_add(list, partition.topic, partition.partition)?.pointee.offset = offset + 1
        }
        let code = rd_kafka_commit(client.handle, list, waitForBroker ? 0 : 1)
        guard code == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(
                .commitFailed, code: code.rawValue, message: String(cString: rd_kafka_err2str(code)), isRetriable: true)
        }
    }

    private func poll(timeoutMilliseconds: Int32) throws(KafkaError) -> KafkaMessage? {
        guard let message = rd_kafka_consumer_poll(client.handle, timeoutMilliseconds) else { return nil }
        defer { rd_kafka_message_destroy(message) }
        let pointee = message.pointee
        guard pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            let text =
                pointee.len > 0 && pointee.payload != nil
                ? String(decoding: UnsafeRawBufferPointer(start: pointee.payload, count: pointee.len), as: UTF8.self)
                : String(cString: rd_kafka_err2str(pointee.err))
            if pointee.err == RD_KAFKA_RESP_ERR__FATAL {
                throw KafkaError(.consumerFailed, code: pointee.err.rawValue, message: text)
            }
            logger.warning("Kafka consumer error", metadata: ["kafka.error": "\(text)", "kafka.group": "\(groupId)"])
            return nil
        }
        let value = pointee.payload.map { Data(bytes: $0, count: pointee.len) } ?? Data()
        let key = pointee.key.map { Data(bytes: $0, count: pointee.key_len) }
        let topic = pointee.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let milliseconds = rd_kafka_message_timestamp(message, &timestampType)
        return KafkaMessage(
            topic: topic, partition: pointee.partition, offset: pointee.offset, key: key, value: value,
            timestamp: milliseconds >= 0 ? Date(timeIntervalSince1970: Double(milliseconds) / 1000) : nil)
    }
}
