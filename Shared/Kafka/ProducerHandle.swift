import CRdKafka
import Foundation
import Logging
import Synchronization

/// One librdkafka producer handle with the thread that serves its delivery reports.
final class ProducerHandle: Sendable {
    let client: RDKafkaClient
    /// A delivery timed out on this handle. It is replaced on the next send: an idempotent producer whose broker
    /// lost its state (a restarted in-memory broker) can otherwise loop on epoch bumps and never deliver again.
    let timedOut = Atomic<Bool>(false)
    private let topics = Mutex<[String: TopicHandle]>([:])
    private let polling = PollLoopControl()

    init(properties: [String: String], logger: Logger) throws {
        self.client = try RDKafkaClient(kind: .producer, properties: properties, logger: logger)
        let client = self.client
        let polling = self.polling
        let thread = Thread {
            while !polling.stop.load(ordering: .acquiring) {
                rd_kafka_poll(client.handle, 50)
            }
            polling.stopped.signal()
        }
        thread.name = "librdkafka-producer-poll"
        thread.start()
    }

    deinit { polling.stop.store(true, ordering: .releasing) }

    /// Hands the messages to librdkafka in the given order (so their order per partition holds), then waits for
    /// every delivery report. Never blocks: a full local queue fails that send as retriable.
    func send(_ messages: [KafkaOutgoingMessage]) async -> [Result<KafkaDeliveryReport, any Error>] {
        let promises = messages.map { message in
            let promise = DeliveryPromise()
            do {
                enqueue(message, promise: promise, topicHandle: try topicHandle(named: message.topic))
            } catch {
                promise.fulfil(.failure(error))
            }
            return promise
        }
        var results: [Result<KafkaDeliveryReport, any Error>] = []
        results.reserveCapacity(promises.count)
        for promise in promises {
            let result: Result<KafkaDeliveryReport, any Error>
            do {
                result = .success(try await promise.value())
            } catch {
                result = .failure(error)
            }
            if case .failure(let error as KafkaError) = result, error.code == RD_KAFKA_RESP_ERR__MSG_TIMED_OUT.rawValue
            {
                timedOut.store(true, ordering: .releasing)
            }
            results.append(result)
        }
        return results
    }

    private func enqueue(
        _ message: KafkaOutgoingMessage, promise promiseObject: DeliveryPromise, topicHandle: TopicHandle
    ) {
        let promise = Unmanaged.passRetained(promiseObject)
        let key = message.key.map { Array($0.utf8) }
        let result = message.value.withUnsafeBytes { payload -> Int32 in
            let payloadPointer = UnsafeMutableRawPointer(mutating: payload.baseAddress)
            guard let key else {
                return rd_kafka_produce(
                    topicHandle.pointer, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, payloadPointer, payload.count,
                    nil, 0, promise.toOpaque()
                )
            }
            return key.withUnsafeBytes { keyBytes in
                rd_kafka_produce(
                    topicHandle.pointer, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, payloadPointer, payload.count,
                    keyBytes.baseAddress, keyBytes.count, promise.toOpaque()
                )
            }
        }
        guard result != 0 else { return }
        let error = rd_kafka_last_error()
        promise.takeRetainedValue().fulfil(
            .failure(
                KafkaError(
                    .deliveryFailed, code: error.rawValue,
                    message: "could not enqueue for \(message.topic): \(String(cString: rd_kafka_err2str(error)))",
                    isRetriable: isRetriableDelivery(error)
                )
            )
        )
    }

    /// Flushes, fails what could not be delivered, stops the poll thread. Blocks; call it off the cooperative pool.
    func shutDown(flushTimeout: Duration) {
        if flushTimeout > .zero {
            rd_kafka_flush(client.handle, Int32(flushTimeout.milliseconds))
        }
        rd_kafka_purge(client.handle, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
        // Serve the purged messages' delivery reports so every waiting send resumes.
        rd_kafka_flush(client.handle, 1_000)
        if !polling.stop.exchange(true, ordering: .acquiringAndReleasing) {
            polling.stopped.wait()
        }
        topics.withLock { $0.removeAll() }
    }

    private func topicHandle(named name: String) throws -> TopicHandle {
        try topics.withLock { topics in
            if let existing = topics[name] { return existing }
            guard let pointer = rd_kafka_topic_new(client.handle, name, nil) else {
                let error = rd_kafka_last_error()
                throw KafkaError(
                    .deliveryFailed, code: error.rawValue,
                    message: "invalid topic '\(name)': \(String(cString: rd_kafka_err2str(error)))"
                )
            }
            let handle = TopicHandle(pointer: pointer, owner: client)
            topics[name] = handle
            return handle
        }
    }
}

/// Tells a poll thread to stop and signals when it did.
private final class PollLoopControl: Sendable {
    let stop = Atomic<Bool>(false)
    let stopped = DispatchSemaphore(value: 0)
}

/// A librdkafka topic handle, destroyed before its producer.
///
/// `@unchecked Sendable`: librdkafka topic handles are thread-safe and the pointer never changes.
private final class TopicHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    private let owner: RDKafkaClient

    init(pointer: OpaquePointer, owner: RDKafkaClient) {
        self.pointer = pointer
        self.owner = owner
    }

    deinit { rd_kafka_topic_destroy(pointer) }
}
