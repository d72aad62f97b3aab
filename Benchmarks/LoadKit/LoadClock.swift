import Foundation

/// The load generators' clock: time since one origin, set at its first use, with that origin also in the host
/// probe's clock (CLOCK_BOOTTIME) and the wall clock, so that what a generator timed can be matched to the host's
/// slow episodes (``HostEpisodes``).
package enum LoadClock {
    private static let start = (instant: ContinuousClock.now, boottime: HostEpisodes.now(), date: Date())

    /// The origin. Read it once before measuring: its first use inside `ContinuousClock.now - origin` would come
    /// after the left side.
    package static var origin: ContinuousClock.Instant { start.instant }
    /// The origin in the host probe's clock.
    package static var originBoottime: Double { start.boottime }
    /// The origin on the wall clock, for times a service stamped (a position's `recordedAt`).
    package static var originDate: Date { start.date }

    /// Nanoseconds from the origin to now, to stamp into what a generator sends.
    package static func nanoseconds() -> Int64 {
        let elapsed = ContinuousClock.now - origin
        return elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000
    }

    /// Milliseconds from a stamp of ``nanoseconds()`` to now.
    package static func milliseconds(since nanoseconds: Int64) -> Double {
        Double(Self.nanoseconds() - nanoseconds) / 1e6
    }

    /// Seconds from the origin to `instant`.
    package static func seconds(at instant: ContinuousClock.Instant) -> Double {
        LatencySamples.milliseconds(instant - origin) / 1000
    }
}
