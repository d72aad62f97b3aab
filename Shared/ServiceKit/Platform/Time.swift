import Foundation
import Synchronization

/// The time now, passed to whatever decides by the time (deadlines, freshness), so tests set it instead of
/// sleeping. Services use ``system``.
package struct Now: Sendable {
    private let read: @Sendable () -> Date

    package init(_ read: @escaping @Sendable () -> Date) { self.read = read }

    /// The machine's clock.
    package static let system = Now { Date() }

    package func callAsFunction() -> Date { read() }
}

/// A clock that moves only when told: for tests of deadlines.
package final class ManualClock: Sendable {
    private let current: Mutex<Date>

    package init(_ start: Date = Date()) { current = Mutex(start) }

    /// Reads this clock.
    package var now: Now { Now { self.current.withLock { $0 } } }

    /// Moves the clock `duration` forward.
    package func advance(by duration: Duration) { current.withLock { $0 = $0 + duration } }
}

extension Duration {
    /// The duration in seconds, with its fraction, for `Date` arithmetic.
    package var timeInterval: TimeInterval { Double(components.seconds) + Double(components.attoseconds) / 1e18 }

    /// The duration in whole milliseconds, rounded down (for settings given to other systems in ms).
    package var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}

extension Date {
    /// The date `duration` later, the fraction of a second kept.
    package static func + (date: Date, duration: Duration) -> Date { date.addingTimeInterval(duration.timeInterval) }

    /// The date `duration` earlier, the fraction of a second kept.
    package static func - (date: Date, duration: Duration) -> Date { date.addingTimeInterval(-duration.timeInterval) }
}
