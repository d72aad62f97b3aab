/// A token-bucket rate limit: `burst` events at once, refilled at `eventsPerSecond`. A value type; callers keep
/// it behind their own lock.
public struct TokenBucket: Sendable {
    /// How many tokens a second refill the bucket.
    public let eventsPerSecond: Double
    /// The bucket's size: the most tokens it holds, and so the most events taken at once after a quiet spell.
    public let burst: Double
    private var tokens: Double
    private var refilledAt: ContinuousClock.Instant

    /// A full bucket of `burst` tokens refilled at `eventsPerSecond`; refilling counts from `now` (tests pass a
    /// fixed instant).
    public init(eventsPerSecond: Double, burst: Int, now: ContinuousClock.Instant = .now) {
        self.eventsPerSecond = eventsPerSecond
        self.burst = Double(burst)
        self.tokens = Double(burst)
        self.refilledAt = now
    }

    /// Takes a token; false if none is left.
    public mutating func take(now: ContinuousClock.Instant = .now) -> Bool {
        let elapsed = now - refilledAt
        let seconds = elapsed / .seconds(1)
        tokens = min(burst, tokens + seconds * eventsPerSecond)
        refilledAt = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
