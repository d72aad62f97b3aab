import Foundation
import Kafka
import Testing

@testable import ServiceKit

/// The outbox relay's decisions, without a broker or a database: what a round publishes and holds, and what a
/// failed row does next.
@Suite("Outbox relay rounds")
struct OutboxRoundTests {
    static func row(_ id: Int64, key: String, bytes: Int = 10, attempts: Int = 0) -> PendingOutboxRow {
        PendingOutboxRow(
            id: id, topic: "orders.events", key: key, payload: String(repeating: "x", count: bytes),
            createdAt: Date(timeIntervalSince1970: 0), attempts: attempts)
    }

    static let retriable = KafkaError(.deliveryFailed, message: "timed out", isRetriable: true)
    static let refused = KafkaError(.deliveryFailed, message: "too large", isRetriable: false)

    @Test("a failed row holds the later rows of its key, and only of its key")
    func heldPerKey() {
        let rows = [Self.row(1, key: "a"), Self.row(2, key: "b"), Self.row(3, key: "a"), Self.row(4, key: "b")]
        let round = OutboxRound(
            rows: rows, answers: [1: Self.retriable, 2: nil, 3: nil, 4: nil], maximumBytes: 100)
        #expect(round.published.map(\.id) == [2, 4])
        #expect(round.failed.map(\.row.id) == [1])
        #expect(round.failed.first?.isPermanent == false)
    }

    @Test("a row acknowledged before its key's failure is published; the ones after are not")
    func orderWithinKey() {
        let rows = [Self.row(1, key: "a"), Self.row(2, key: "a"), Self.row(3, key: "a")]
        let round = OutboxRound(rows: rows, answers: [1: nil, 2: Self.refused, 3: nil], maximumBytes: 100)
        #expect(round.published.map(\.id) == [1])
        #expect(round.failed.map(\.row.id) == [2])
        #expect(round.failed.first?.isPermanent == true)
    }

    @Test("a row over the size limit is not sent, fails for good, and holds its key")
    func tooLarge() {
        let rows = [Self.row(1, key: "a", bytes: 101), Self.row(2, key: "a"), Self.row(3, key: "b")]
        let sendable = OutboxRound.sendable(rows, maximumBytes: 100)
        #expect(sendable.map(\.id) == [2, 3])
        let round = OutboxRound(rows: rows, answers: [2: nil, 3: nil], maximumBytes: 100)
        #expect(round.published.map(\.id) == [3])
        #expect(round.failed.map(\.isPermanent) == [true])
        #expect(round.failed.first?.error == "the event is 101 bytes; the limit is 100")
    }

    @Test("a retriable failure backs off from 0.5 s, doubling up to 30 s, and never dies")
    func backoff() {
        let steps = (0..<9).map { attempts in
            OutboxRound.step(
                after: OutboxRound.Failure(
                    row: Self.row(1, key: "a", attempts: attempts), error: "", isPermanent: false)
            )
        }
        #expect(
            steps.map { step -> Int in
                guard case .retry(_, let milliseconds) = step else { return -1 }
                return milliseconds
            } == [500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000])
        #expect(steps.first == .retry(attempts: 1, backoffMilliseconds: 500))
    }

    @Test("a row refused for good is retried until its third try, then becomes a dead letter")
    func deadLetter() {
        func step(_ attempts: Int) -> OutboxRound.Step {
            OutboxRound.step(
                after: OutboxRound.Failure(row: Self.row(1, key: "a", attempts: attempts), error: "", isPermanent: true)
            )
        }
        #expect(step(0) == .retry(attempts: 1, backoffMilliseconds: 500))
        #expect(step(1) == .retry(attempts: 2, backoffMilliseconds: 1000))
        #expect(step(2) == .deadLetter(attempts: 3))
    }
}
