import CRdKafka
import Dispatch
import Foundation
import Logging
import Synchronization

/// The consumer's own thread: polls while a message is wanted, runs commits between polls, closes.
final class ConsumerLoop: Sendable {
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
    private let recordsBeforeTime: RecordsBeforeTime?
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)

    /// - Parameter recordsBeforeTime: for a reader from a time, what it must not deliver.
    init(client: RDKafkaClient, groupId: String, logger: Logger, recordsBeforeTime: RecordsBeforeTime? = nil) {
        self.client = client
        self.groupId = groupId
        self.logger = logger
        self.recordsBeforeTime = recordsBeforeTime
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

    /// The next message; nil if none came in time, an error was logged instead, or the record is one a reader from a
    /// time must not deliver.
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
        let topic = pointee.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let milliseconds = rd_kafka_message_timestamp(message, &timestampType)
        if let recordsBeforeTime,
            !recordsBeforeTime.admits(
                KafkaTopicPartition(topic: topic, partition: pointee.partition), offset: pointee.offset,
                stamp: milliseconds)
        {
            return nil
        }
        let value = pointee.payload.map { Data(bytes: $0, count: pointee.len) } ?? Data()
        let key = pointee.key.map { Data(bytes: $0, count: pointee.key_len) }
        return KafkaMessage(
            topic: topic, partition: pointee.partition, offset: pointee.offset, key: key, value: value,
            timestamp: milliseconds >= 0 ? Date(timeIntervalSince1970: Double(milliseconds) / 1000) : nil)
    }
}
