import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// An idempotent producer (acks=all). `send` returns once the broker acknowledged the message and throws a
/// ``KafkaError`` otherwise. Keep one per process: its first delivery costs a producer-id round trip.
///
/// A dedicated thread serves librdkafka's callbacks, so nothing here blocks Swift's cooperative pool. If
/// librdkafka raises a fatal error (for example a broker that lost the producer's state after a restart), the
/// handle is replaced transparently and the affected sends fail as retriable.
package final class KafkaProducer: Service, Sendable {
    private let configuration: KafkaProducerConfiguration
    private let logger: Logger
    private let state: Mutex<State>

    private struct State {
        var current: ProducerHandle?
        var isClosed = false
    }

    package init(configuration: KafkaProducerConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        let handle = try ProducerHandle(properties: configuration.properties, logger: logger)
        self.state = Mutex(State(current: handle))
    }

    /// Sends one message and waits for the broker's acknowledgement.
    /// - Parameters:
    ///   - topic: the topic name.
    ///   - key: the partitioning key; messages with one key stay in order.
    ///   - value: the message body.
    /// - Throws: ``KafkaError`` `.deliveryFailed` (check `isRetriable`) or `.closed`.
    @discardableResult
    package func send(topic: String, key: String?, value: Data) async throws -> KafkaDeliveryReport {
        try await send([KafkaOutgoingMessage(topic: topic, key: key, value: value)])[0].get()
    }

    /// Sends messages in order (their order per partition holds) and waits for every acknowledgement.
    /// - Returns: one result per message, in the same order.
    package func send(_ messages: [KafkaOutgoingMessage]) async throws -> [Result<KafkaDeliveryReport, any Error>] {
        let handle = try currentHandle()
        return await handle.send(messages)
    }

    /// Checks that a broker answers, off the cooperative pool.
    /// - Returns: the number of brokers in the cluster.
    package func checkBroker(timeout: Duration = .seconds(2)) async throws -> Int {
        let handle = try currentHandle()
        return try await runBlocking { try handle.client.queryBrokers(timeout: timeout) }
    }

    /// Runs until graceful shutdown, then flushes what is queued and closes.
    package func run() async throws {
        try? await gracefulShutdown()
        await close()
    }

    /// Waits up to `flushTimeout` for queued messages, fails the rest, and releases the handle.
    package func close(flushTimeout: Duration = .seconds(10)) async {
        let handle = state.withLock { state -> ProducerHandle? in
            state.isClosed = true
            defer { state.current = nil }
            return state.current
        }
        guard let handle else { return }
        _ = try? await runBlocking { handle.shutDown(flushTimeout: flushTimeout) }
    }

    private func currentHandle() throws -> ProducerHandle {
        let (handle, retired) = try state.withLock { state throws -> (ProducerHandle, ProducerHandle?) in
            guard !state.isClosed, let current = state.current else {
                throw KafkaError(.closed, message: "the producer is closed")
            }
            guard current.client.isFatal || current.timedOut.load(ordering: .acquiring) else { return (current, nil) }
            let replacement = try ProducerHandle(properties: configuration.properties, logger: logger)
            state.current = replacement
            return (replacement, current)
        }
        if let retired {
            logger.warning(
                "replaced the Kafka producer",
                metadata: ["reason": "\(retired.client.isFatal ? "fatal error" : "delivery timed out")"]
            )
            let thread = Thread { retired.shutDown(flushTimeout: .zero) }
            thread.name = "librdkafka-retire-producer"
            thread.start()
        }
        return handle
    }
}

/// A message to produce.
package struct KafkaOutgoingMessage: Sendable {
    package var topic: String
    /// The partitioning key; messages with one key stay in order.
    package var key: String?
    package var value: Data
    package init(topic: String, key: String?, value: Data) {
        self.topic = topic
        self.key = key
        self.value = value
    }
}
