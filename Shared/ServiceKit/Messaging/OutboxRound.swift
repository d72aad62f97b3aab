import Foundation
import Kafka

/// An outbox row waiting to be published, as the relay reads it.
struct PendingOutboxRow: Sendable, Equatable {
    var id: Int64
    var topic: String
    var key: String
    var payload: String
    var createdAt: Date
    var attempts: Int
}

/// What one relay round decides from the broker's answers, with no I/O: which rows are marked published, which
/// failed and what becomes of each. A row is published only if it and every earlier row of its key in the round
/// were acknowledged, so per-aggregate order survives a partial failure.
struct OutboxRound: Sendable, Equatable {
    /// A row the broker did not take this round.
    struct Failure: Sendable, Equatable {
        var row: PendingOutboxRow
        var error: String
        /// The broker will never take it (too large, invalid), however often it is tried.
        var isPermanent: Bool
    }

    /// What a failed row does next.
    enum Step: Sendable, Equatable {
        /// Tried again after a back-off, with `attempts` recorded.
        case retry(attempts: Int, backoffMilliseconds: Int)
        /// Moved to `outbox_dead_letters` after `attempts`; its key stays held until an operator resolves it.
        case deadLetter(attempts: Int)
    }

    /// Tries a row the broker refused for good gets before it becomes a dead letter.
    static let permanentFailureAttempts = 3

    /// The rows to mark published, in the round's order.
    var published: [PendingOutboxRow] = []
    var failed: [Failure] = []

    /// The rows the round sends: a row over `maximumBytes` (written before the limit was checked at enqueue) is
    /// never sent, since the broker would refuse it and the attempt would only delay the rows behind it.
    static func sendable(_ rows: [PendingOutboxRow], maximumBytes: Int) -> [PendingOutboxRow] {
        rows.filter { $0.payload.utf8.count <= maximumBytes }
    }

    /// The round of `rows` (in id order), given the broker's answer to each row that was sent (a nil error: it
    /// was acknowledged); a row with no answer was not sent for its size (`maximumBytes`).
    init(rows: [PendingOutboxRow], answers: [Int64: KafkaError?], maximumBytes: Int) {
        var heldKeys = Set<String>()
        for row in rows {
            guard let answer = answers[row.id] else {
                heldKeys.insert(row.key)
                let error = "the event is \(row.payload.utf8.count) bytes; the limit is \(maximumBytes)"
                failed.append(Failure(row: row, error: error, isPermanent: true))
                continue
            }
            if let error = answer {
                heldKeys.insert(row.key)
                failed.append(Failure(row: row, error: "\(error)", isPermanent: !error.isRetriable))
            } else if !heldKeys.contains(row.key) {
                published.append(row)
            }
        }
    }

    /// The longest a failed row waits before its next attempt.
    static let maximumBackoff: Duration = .seconds(30)

    /// What `failure` does next: a dead letter once refused for good ``permanentFailureAttempts`` times, otherwise
    /// a retry after a back-off of 0.5 s doubling with each earlier attempt, at most ``maximumBackoff``.
    static func step(after failure: Failure) -> Step {
        let attempts = failure.row.attempts + 1
        if failure.isPermanent, attempts >= permanentFailureAttempts { return .deadLetter(attempts: attempts) }
        return .retry(
            attempts: attempts,
            backoffMilliseconds: min(500 << min(failure.row.attempts, 6), Int(maximumBackoff.milliseconds)))
    }
}
