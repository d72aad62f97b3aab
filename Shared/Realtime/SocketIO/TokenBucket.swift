/// A token-bucket rate limit: `burst` events at once, refilled at `eventsPerSecond`. A value type; callers keep
/// it behind their own lock.
package struct TokenBucket: Sendable {
    package let eventsPerSecond: Double
    package let burst: Double
    private var tokens: Double
    private var refilledAt: ContinuousClock.Instant

    package init(eventsPerSecond: Double, burst: Int, now: ContinuousClock.Instant = .now) {
        self.eventsPerSecond = eventsPerSecond
        self.burst = Double(burst)
        self.tokens = Double(burst)
        self.refilledAt = now
    }

    /// Takes a token; false if none is left.
    package mutating func take(now: ContinuousClock.Instant = .now) -> Bool {
        let elapsed = now - refilledAt
        let seconds = elapsed / .seconds(1)
        tokens = min(burst, tokens + seconds * eventsPerSecond)
        refilledAt = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
