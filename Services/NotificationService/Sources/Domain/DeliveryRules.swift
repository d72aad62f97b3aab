import Contracts
import Foundation

/// What to do with a delivery after a provider's answer.
package enum DeliveryDecision: Sendable, Equatable {
    /// Delivered: the notification is sent (PushSent once, for its first device).
    case sent
    /// Try again after `delay`.
    case retry(after: Duration)
    /// Stop trying this device: a dead letter; PushFailed when no device of the notification is left.
    case giveUp(reason: String)
    /// The token is dead: remove the device; PushFailed when no device of the notification is left.
    case removeToken
}

/// Notification's decisions, pure: retries with backoff, when to give up, how long an attempt's lease lasts.
package enum DeliveryRules {
    /// The decision for attempt number `attempt` (1 for the first) ending in `outcome`.
    package static func decide(
        _ outcome: PushOutcome, attempt: Int, settings: NotificationSettings,
        jitter: Double = Double.random(in: 0.5...1.0)
    ) -> DeliveryDecision {
        switch outcome {
        case .sent:
            return .sent
        case .retry(_, _, let after) where attempt < settings.maximumAttempts:
            return .retry(
                after: retryDelay(
                    attempt: attempt, retryAfter: after, initial: settings.retryInitial,
                    maximum: settings.retryMaximum, jitter: jitter))
        case .retry:
            return .giveUp(reason: "no success after \(attempt) attempts")
        case .failed:
            return .giveUp(reason: "refused")
        case .invalidToken:
            return .removeToken
        }
    }

    /// The delay before attempt `attempt + 1`: exponential backoff with jitter (`jitter`, from 0.5 to 1, of the
    /// doubled delay), never shorter than the provider's Retry-After, capped. (Retry-After alone, often 1 s, spent
    /// every attempt within 5 s of throttling: the soak's 6 s of 429s dead-lettered a push.)
    package static func retryDelay(
        attempt: Int, retryAfter: Duration?, initial: Duration, maximum: Duration, jitter: Double
    ) -> Duration {
        let doubled = initial * (1 << min(attempt - 1, 20))
        let backoff = min(doubled, maximum) * jitter
        return min(max(backoff, retryAfter ?? .zero), maximum)
    }

    /// How long an attempt holds its delivery: past it, another instance may attempt it (the holder went away).
    package static func lease(timeout: Duration) -> Duration { timeout * 2 + .seconds(5) }
}

extension PushOutcome {
    /// The provider's HTTP status (nil when none came) and answer, as the delivery log keeps them.
    package var answer: (status: Int?, text: String) {
        switch self {
        case .sent(let status, let answer), .invalidToken(let status, let answer): (status, answer)
        case .retry(let status, let answer, _), .failed(let status, let answer): (status, answer)
        }
    }
}
