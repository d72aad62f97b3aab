import Contracts
import Foundation
import NotificationService
import ServiceKit
import Testing

@Suite("Notification's delivery rules: retry, back-off, give up, dead tokens (no database, no sleeping)")
struct DeliveryRulesTests {
    static let settings = try! NotificationSettings(
        environment: ServiceEnvironment([
            "PUSH_LOG_PROVIDER": "true", "PUSH_MAX_ATTEMPTS": "3", "PUSH_RETRY_INITIAL_MS": "1000",
            "PUSH_RETRY_MAX_SECONDS": "300",
        ]))

    @Test("each outcome's decision; the last allowed attempt gives up instead of retrying")
    func decisions() {
        func decide(_ outcome: PushOutcome, attempt: Int) -> DeliveryDecision {
            DeliveryRules.decide(outcome, attempt: attempt, settings: Self.settings, jitter: 1)
        }
        #expect(decide(.sent(status: 200, answer: "{}"), attempt: 1) == .sent)
        #expect(decide(.retry(status: 503, answer: "", after: nil), attempt: 1) == .retry(after: .seconds(1)))
        #expect(decide(.retry(status: 503, answer: "", after: nil), attempt: 2) == .retry(after: .seconds(2)))
        #expect(
            decide(.retry(status: 503, answer: "", after: nil), attempt: 3)
                == .giveUp(reason: "no success after 3 attempts"))
        #expect(decide(.failed(status: 400, answer: "bad"), attempt: 1) == .giveUp(reason: "refused"))
        #expect(decide(.invalidToken(status: 410, answer: "Unregistered"), attempt: 1) == .removeToken)
    }

    @Test("back-off doubles from the initial delay with jitter, capped; never shorter than Retry-After, capped too")
    func backOff() {
        let initial = Duration.milliseconds(500)
        let maximum = Duration.seconds(10)
        func delay(_ attempt: Int, after: Duration? = nil, jitter: Double = 1) -> Duration {
            DeliveryRules.retryDelay(
                attempt: attempt, retryAfter: after, initial: initial, maximum: maximum, jitter: jitter)
        }
        #expect(
            (1...6).map { delay($0) } == [
                .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10),
            ])
        #expect(delay(3, jitter: 0.5) == .seconds(1))
        #expect(delay(10_000) == maximum, "no overflow for a huge attempt number")
        #expect(delay(1, after: .seconds(7)) == .seconds(7))
        #expect(delay(5, after: .seconds(1)) == .seconds(8), "a short Retry-After does not cut the backoff")
        #expect(delay(1, after: .seconds(3600)) == maximum)
        #expect(DeliveryRules.lease(timeout: .seconds(10)) == .seconds(25))
    }

    @Test("the delivery log keeps each outcome's status and answer")
    func answers() {
        #expect(PushOutcome.retry(status: nil, answer: "timed out", after: nil).answer == (nil, "timed out"))
        #expect(PushOutcome.sent(status: 200, answer: "ok").answer == (200, "ok"))
    }

    @Test("device tokens: the shape each provider issues, limits in bytes, redacted in logs")
    func deviceTokens() throws {
        let apns = String(repeating: "ab", count: 32)
        #expect(try DeviceRules.validToken(" \(apns)\n", platform: .ios) == apns)
        #expect(throws: DeviceRules.TokenProblem.malformed(.ios)) {
            try DeviceRules.validToken(String(repeating: "zz", count: 32), platform: .ios)
        }
        #expect(throws: DeviceRules.TokenProblem.tooLong(maximumBytes: 200)) {
            try DeviceRules.validToken(String(repeating: "a", count: 202), platform: .ios)
        }
        #expect(try DeviceRules.validToken("fcm-Token_1:APA91.b", platform: .android) == "fcm-Token_1:APA91.b")
        #expect(throws: DeviceRules.TokenProblem.malformed(.android)) {
            try DeviceRules.validToken("token with spaces", platform: .android)
        }
        #expect(throws: DeviceRules.TokenProblem.empty) { try DeviceRules.validToken("  ", platform: .android) }
        #expect(DeviceRules.redacted(apns) == "abababab...(64 bytes)")
    }
}
