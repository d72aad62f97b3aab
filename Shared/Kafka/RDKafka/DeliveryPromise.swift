import Synchronization

/// One message's pending delivery report, passed to librdkafka as the message opaque. The report may arrive
/// before or after someone waits for it; a waiting task that is cancelled stops waiting with `CancellationError`
/// (the message may still be delivered).
final class DeliveryPromise: Sendable {
    private enum State {
        case pending
        case waiting(CheckedContinuation<KafkaDeliveryReport, any Error>)
        case done(Result<KafkaDeliveryReport, any Error>)
    }

    private let state = Mutex<State>(.pending)

    func fulfil(_ result: Result<KafkaDeliveryReport, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<KafkaDeliveryReport, any Error>? in
            switch state {
            case .pending:
                state = .done(result)
                return nil
            case .waiting(let continuation):
                state = .done(result)
                return continuation
            case .done:
                return nil
            }
        }
        waiter?.resume(with: result)
    }

    /// The broker's answer.
    func value() async throws -> KafkaDeliveryReport {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let ready = state.withLock { state -> Result<KafkaDeliveryReport, any Error>? in
                    switch state {
                    case .pending:
                        state = .waiting(continuation)
                        return nil
                    case .done(let result):
                        return result
                    case .waiting:
                        preconditionFailure("a delivery promise is awaited once")
                    }
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            fulfil(.failure(CancellationError()))
        }
    }
}
