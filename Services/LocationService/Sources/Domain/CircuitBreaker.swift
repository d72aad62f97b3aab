import Synchronization

/// Stops calling a failing provider for a while: after `failureThreshold` failures in a row it is open (calls
/// fail at once) for `openFor`, then one trial call decides.
package final class CircuitBreaker: Sendable {
    package struct Open: Error, CustomStringConvertible {
        package var description: String { "the routing service is failing; not calling it for now" }
    }

    private struct State {
        var failures = 0
        var openUntil: ContinuousClock.Instant?
        var trialInFlight = false
    }

    private let state = Mutex(State())
    private let failureThreshold: Int
    private let openFor: Duration

    package init(failureThreshold: Int, openFor: Duration) {
        self.failureThreshold = failureThreshold
        self.openFor = openFor
    }

    /// Runs `call` unless the breaker is open.
    package func run<T: Sendable>(now: ContinuousClock.Instant = .now, _ call: () async throws -> T) async throws -> T {
        let allowed = state.withLock { state -> Bool in
            guard let openUntil = state.openUntil else { return true }
            guard now >= openUntil, !state.trialInFlight else { return false }
            state.trialInFlight = true
            return true
        }
        guard allowed else { throw Open() }
        do {
            let value = try await call()
            state.withLock { $0 = State() }
            return value
        } catch {
            state.withLock { state in
                state.failures += 1
                state.trialInFlight = false
                if state.failures >= failureThreshold { state.openUntil = now + openFor }
            }
            throw error
        }
    }

    /// Whether calls made at `now` fail at once.
    package func isOpen(at now: ContinuousClock.Instant = .now) -> Bool {
        state.withLock { $0.openUntil.map { now < $0 } ?? false }
    }
}
