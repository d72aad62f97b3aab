import Foundation
import Synchronization

/// Latency samples in milliseconds, safe to add from many tasks, summarised as percentiles.
package final class LatencySamples: Sendable {
    private let values = Mutex<[Double]>([])
    /// Each sample given with the moment its operation began, in seconds of the load's clock.
    private let timed = Mutex<[(sentAt: Double, milliseconds: Double)]>([])

    package init() {}

    package var count: Int { values.withLock { $0.count } }

    package func add(_ milliseconds: Double) { values.withLock { $0.append(milliseconds) } }

    /// Adds a sample whose operation began at `sentAt`, in seconds of the load's clock, for ``bySecond()`` and
    /// ``split(by:origin:)``.
    package func add(_ milliseconds: Double, sentAt: Double) {
        add(milliseconds)
        timed.withLock { $0.append((sentAt, milliseconds)) }
    }

    /// The samples given with ``add(_:sentAt:)`` split by whether their operation met one of the host's slow
    /// `episodes`; `origin` is the load clock's zero in the episodes' clock.
    package func split(by episodes: HostEpisodes, origin: Double) -> (clear: LatencySamples, met: LatencySamples) {
        let clear = LatencySamples()
        let met = LatencySamples()
        for (sentAt, milliseconds) in timed.withLock({ $0 }) {
            let began = origin + sentAt
            (episodes.touch(from: began, to: began + milliseconds / 1000) ? met : clear).add(milliseconds)
        }
        return (clear, met)
    }

    /// The samples given with ``add(_:sentAt:)``, a set for each second, in order.
    package func bySecond() -> [(second: Int, samples: LatencySamples)] {
        let bySecond = Dictionary(grouping: timed.withLock { $0 }) { Int($0.sentAt) }
        return bySecond.sorted { $0.key < $1.key }.map { second, timed in
            let samples = LatencySamples()
            samples.values.withLock { $0 = timed.map(\.milliseconds) }
            return (second, samples)
        }
    }

    /// Records the time from `start` until now.
    package func add(since start: ContinuousClock.Instant) { add(Self.milliseconds(ContinuousClock.now - start)) }

    /// "p50 … ms, p95 … ms, p99 … ms, max … ms (n=…)".
    package func summary() -> String {
        let sorted = values.withLock { $0 }.sorted()
        guard let maximum = sorted.last else { return "no samples" }
        func at(_ p: Double) -> String {
            String(format: "%.2f", sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))])
        }
        return
            "p50 \(at(0.5)) ms, p95 \(at(0.95)) ms, p99 \(at(0.99)) ms, max \(String(format: "%.2f", maximum)) ms (n=\(sorted.count))"
    }

    package static func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }
}
