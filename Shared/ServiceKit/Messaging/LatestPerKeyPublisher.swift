import Foundation
import Kafka
import Logging
import Metrics
import ServiceLifecycle
import Synchronization

/// Publishes messages of which only the latest per key matters (a courier's position) to one topic. A newer message
/// replaces the one still waiting for its key, and everything waiting goes out as one batch once the previous batch
/// is acknowledged and `interval` has passed since it left, so throughput follows the broker's batches rather than
/// one acknowledgement per message (16 sends at a time, one message each, fell behind at 5,000 couriers a second and
/// dropped positions), and the partitions grow by a few batches a second rather than hundreds (Tansu lists every
/// batch of a partition on each fetch). At most
/// `capacity` keys wait: past that a message is dropped, counted in `latest_per_key_dropped_total{topic}`. Best
/// effort: a batch the broker refuses is logged, not retried (the next message of each key supersedes it).
package final class LatestPerKeyPublisher: Service, Sendable {
    package let topic: String
    private let capacity: Int
    private let interval: Duration
    private let producer: KafkaProducer
    private let dropped: Counter
    private let logger: Logger

    private struct State {
        /// Keys in the order their first waiting message arrived.
        var order: [String] = []
        var waiting: [String: Data] = [:]
        var sender: CheckedContinuation<[KafkaOutgoingMessage]?, Never>?
        var stopped = false

        /// Takes what waits, as messages in arrival order.
        mutating func take(topic: String) -> [KafkaOutgoingMessage] {
            defer {
                order.removeAll(keepingCapacity: true)
                waiting.removeAll(keepingCapacity: true)
            }
            return order.compactMap { key in
                waiting[key].map { KafkaOutgoingMessage(topic: topic, key: key, value: $0) }
            }
        }
    }

    private let state = Mutex(State())

    /// - Parameter interval: the least time from one batch's departure to the next's.
    package init(
        topic: String, capacity: Int = 50_000, interval: Duration = .milliseconds(100), producer: KafkaProducer,
        logger: Logger
    ) {
        precondition(capacity > 0, "capacity must be positive")
        self.topic = topic
        self.capacity = capacity
        self.interval = interval
        self.producer = producer
        self.dropped = Counter(label: "latest_per_key_dropped_total", dimensions: [("topic", topic)])
        self.logger = logger
    }

    /// Queues `value` for `key`, replacing a message of the key that still waits; false (and counted) if `capacity`
    /// other keys wait or the publisher stopped.
    @discardableResult
    package func publish(key: String, value: Data) -> Bool {
        enum Outcome {
            case queued
            case handOver(CheckedContinuation<[KafkaOutgoingMessage]?, Never>, [KafkaOutgoingMessage])
            case dropped
        }
        let outcome = state.withLock { state -> Outcome in
            guard !state.stopped else { return .dropped }
            if state.waiting[key] == nil {
                guard state.order.count < capacity else { return .dropped }
                state.order.append(key)
            }
            state.waiting[key] = value
            guard let sender = state.sender else { return .queued }
            state.sender = nil
            return .handOver(sender, state.take(topic: topic))
        }
        switch outcome {
        case .queued: return true
        case .handOver(let sender, let batch):
            sender.resume(returning: batch)
            return true
        case .dropped:
            dropped.increment()
            logger.warning("message dropped: too many keys wait, or stopped", metadata: ["topic": "\(topic)"])
            return false
        }
    }

    /// Sends batches until graceful shutdown, then what still waits.
    package func run() async throws {
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                while let batch = await nextBatch() {
                    let departure = ContinuousClock.now
                    await send(batch)
                    // Stopped or cancelled, what waits goes out at once.
                    if !state.withLock({ $0.stopped }) { try? await Task.sleep(until: departure + interval) }
                }
            } onGracefulShutdown: {
                self.stop()
            }
        } onCancel: {
            self.stop()
        }
    }

    /// Stops taking messages; `run` sends what waits and ends.
    package func stop() {
        let sender = state.withLock { state in
            state.stopped = true
            defer { state.sender = nil }
            return state.sender
        }
        sender?.resume(returning: nil)
    }

    /// What waits, once there is any; nil once stopped and empty.
    private func nextBatch() async -> [KafkaOutgoingMessage]? {
        await withCheckedContinuation { continuation in
            let immediate = state.withLock { state -> [KafkaOutgoingMessage]?? in
                if !state.order.isEmpty { return .some(state.take(topic: topic)) }
                if state.stopped { return .some(nil) }
                state.sender = continuation
                return .none
            }
            if let immediate { continuation.resume(returning: immediate) }
        }
    }

    private func send(_ batch: [KafkaOutgoingMessage]) async {
        let failures: [any Error]
        do {
            failures = try await producer.send(batch).compactMap { result in
                if case .failure(let error) = result { error } else { nil }
            }
        } catch {
            failures = [error]
        }
        guard let first = failures.first else { return }
        logger.warning(
            "messages not published",
            metadata: ["topic": "\(topic)", "count": "\(failures.count)", "error": "\(first)"])
    }
}
