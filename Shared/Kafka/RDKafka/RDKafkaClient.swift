import CRdKafka
import Dispatch
import Foundation
import Logging
import Synchronization

/// State shared with librdkafka's C callbacks through the handle's opaque pointer.
final class RDKafkaCallbackContext: Sendable {
    let logger: Logger
    let brokers: String
    /// Set once librdkafka raised a fatal error; the handle must then be replaced.
    let fatal = Atomic<Bool>(false)
    /// The last transport-level error, cleared when a request succeeds again.
    let lastBrokerError = Mutex<String?>(nil)

    init(logger: Logger, brokers: String) {
        self.logger = logger
        self.brokers = brokers
    }
}

/// Owns one librdkafka handle and destroys it in `deinit`. The only type that touches `rd_kafka_t`.
///
/// `@unchecked Sendable`: librdkafka handles are thread-safe; the pointers are immutable after `init`.
final class RDKafkaClient: @unchecked Sendable {
    enum Kind {
        case producer
        case consumer
    }

    let handle: OpaquePointer
    let kind: Kind
    let context: RDKafkaCallbackContext
    private let retainedContext: Unmanaged<RDKafkaCallbackContext>

    init(kind: Kind, properties: [String: String], logger: Logger) throws {
        var conf: OpaquePointer? = rd_kafka_conf_new()
        defer { if let conf { rd_kafka_conf_destroy(conf) } }

        for (key, value) in properties.sorted(by: { $0.key < $1.key }) {
            var error = [CChar](repeating: 0, count: 512)
            if rd_kafka_conf_set(conf, key, value, &error, error.count) != RD_KAFKA_CONF_OK {
                throw KafkaError(
                    .configuration,
                    message: "librdkafka property '\(key)'='\(value)': \(String(errorBuffer: error))"
                )
            }
        }

        let context = RDKafkaCallbackContext(logger: logger, brokers: properties["bootstrap.servers"] ?? "?")
        let retained = Unmanaged.passRetained(context)
        rd_kafka_conf_set_opaque(conf, retained.toOpaque())
        rd_kafka_conf_set_log_cb(conf) { handle, level, facility, message in
            guard let handle, let opaque = rd_kafka_opaque(handle) else { return }
            let context = Unmanaged<RDKafkaCallbackContext>.fromOpaque(opaque).takeUnretainedValue()
            let text = message.map { String(cString: $0) } ?? ""
            let facilityText = facility.map { String(cString: $0) } ?? ""
            // Broker connection failures are reported once per outage by the error callback instead.
            let logLevel: Logger.Level = facilityText == "FAIL" ? .debug : Logger.Level(syslogLevel: level)
            context.logger.log(
                level: logLevel, "librdkafka: \(text)",
                metadata: ["kafka.facility": "\(facilityText)"]
            )
        }
        rd_kafka_conf_set_error_cb(conf) { handle, rawCode, reason, opaque in
            guard let opaque else { return }
            let code = rd_kafka_resp_err_t(rawValue: rawCode)
            let context = Unmanaged<RDKafkaCallbackContext>.fromOpaque(opaque).takeUnretainedValue()
            let text = reason.map { String(cString: $0) } ?? String(cString: rd_kafka_err2str(code))
            if code == RD_KAFKA_RESP_ERR__FATAL {
                var detail = [CChar](repeating: 0, count: 512)
                let underlying = rd_kafka_fatal_error(handle, &detail, detail.count)
                context.fatal.store(true, ordering: .releasing)
                context.logger.error(
                    "Kafka client hit a fatal error and will be replaced",
                    metadata: [
                        "kafka.error": "\(String(errorBuffer: detail))",
                        "kafka.code": "\(underlying.rawValue)",
                        "kafka.library": "\(KafkaLibrary.description)",
                    ]
                )
                return
            }
            let isBrokerDown =
                code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || code == RD_KAFKA_RESP_ERR__TRANSPORT
                || code == RD_KAFKA_RESP_ERR__RESOLVE
            if isBrokerDown {
                let isNew = context.lastBrokerError.withLock { last in
                    defer { last = text }
                    return last == nil
                }
                // One line per outage, not one per reconnect attempt.
                if isNew {
                    context.logger.warning(
                        "Kafka broker unreachable at \(context.brokers)",
                        metadata: ["kafka.error": "\(text)", "kafka.library": "\(KafkaLibrary.description)"]
                    )
                }
            } else {
                context.logger.warning(
                    "Kafka client error", metadata: ["kafka.error": "\(text)", "kafka.code": "\(code.rawValue)"]
                )
            }
        }
        if kind == .producer {
            rd_kafka_conf_set_dr_msg_cb(conf) { _, message, _ in
                guard let message, let opaque = message.pointee._private else { return }
                let delivery = Unmanaged<DeliveryPromise>.fromOpaque(opaque).takeRetainedValue()
                let pointee = message.pointee
                if pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR {
                    delivery.fulfil(.success(KafkaDeliveryReport(partition: pointee.partition, offset: pointee.offset)))
                } else {
                    delivery.fulfil(
                        .failure(
                            KafkaError(
                                .deliveryFailed, code: pointee.err.rawValue,
                                message: String(cString: rd_kafka_err2str(pointee.err)),
                                isRetriable: isRetriableDelivery(pointee.err)
                            )
                        )
                    )
                }
            }
        }

        var error = [CChar](repeating: 0, count: 512)
        let type = kind == .producer ? RD_KAFKA_PRODUCER : RD_KAFKA_CONSUMER
        guard let handle = rd_kafka_new(type, conf, &error, error.count) else {
            retained.release()
            throw KafkaError(.configuration, message: "rd_kafka_new failed: \(String(errorBuffer: error))")
        }
        conf = nil  // rd_kafka_new took ownership
        self.handle = handle
        self.kind = kind
        self.context = context
        self.retainedContext = retained
    }

    deinit {
        // rd_kafka_destroy blocks (a consumer that was not closed leaves its group first, up to the session
        // timeout), so it never runs on the thread that dropped the last reference: often the cooperative pool.
        let handle = UncheckedHandle(pointer: handle, context: retainedContext)
        let thread = Thread {
            rd_kafka_destroy(handle.pointer)
            handle.context.release()
        }
        thread.name = "librdkafka-destroy"
        thread.start()
    }

    var isFatal: Bool { context.fatal.load(ordering: .acquiring) }

    /// Asks a broker for cluster metadata. Blocks the calling thread up to `timeout`; call it off the
    /// cooperative pool.
    func queryBrokers(timeout: Duration) throws(KafkaError) -> Int {
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let code = rd_kafka_metadata(handle, 0, nil, &metadata, Int32(timeout.milliseconds))
        guard code == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
            throw KafkaError(
                .brokerUnavailable, code: code.rawValue,
                message: "no broker at \(context.brokers) answered: \(String(cString: rd_kafka_err2str(code)))",
                isRetriable: true
            )
        }
        defer { rd_kafka_metadata_destroy(metadata) }
        context.lastBrokerError.withLock { $0 = nil }
        return Int(metadata.pointee.broker_cnt)
    }
}

/// A handle on its way to destruction on another thread.
///
/// `@unchecked Sendable`: the pointer is used by exactly one thread after the owner is gone.
private struct UncheckedHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    let context: Unmanaged<RDKafkaCallbackContext>
}

/// Runs a blocking librdkafka call on a thread of its own, never on Swift's cooperative pool nor on GCD's
/// width-limited global queues (on Linux both are as wide as the machine has cores).
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.name = "librdkafka-blocking-call"
        thread.start()
    }
}

extension Logger.Level {
    /// Maps librdkafka's syslog levels to swift-log levels, one step quieter: the wrapper reports what matters.
    init(syslogLevel: Int32) {
        switch syslogLevel {
        case ...3: self = .warning
        case 4: self = .notice
        case 5: self = .info
        default: self = .debug
        }
    }
}

/// Whether sending the same message again may succeed. A fatal error is retriable here: the producer replaces
/// its handle. A message that is too large or malformed is not.
func isRetriableDelivery(_ error: rd_kafka_resp_err_t) -> Bool {
    switch error {
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, RD_KAFKA_RESP_ERR__INVALID_ARG,
        RD_KAFKA_RESP_ERR_INVALID_MSG, RD_KAFKA_RESP_ERR__BAD_MSG, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
        return false
    default:
        return true
    }
}
