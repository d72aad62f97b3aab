import Foundation
import Synchronization

/// Latency samples in milliseconds, safe to add from many tasks, summarised as percentiles.
package final class LatencySamples: Sendable {
    private struct Samples {
        var values: [Double] = []
        /// Each sample given with the moment its operation began, in seconds of the load's clock.
        var timed: [(sentAt: Double, milliseconds: Double)] = []
    }

    private let samples = Mutex(Samples())

    package init() {}

    package var count: Int { samples.withLock { $0.values.count } }

    package func add(_ milliseconds: Double) { samples.withLock { $0.values.append(milliseconds) } }

    /// Adds a sample whose operation began at `sentAt`, in seconds of the load's clock, for ``bySecond()`` and
    /// ``split(by:origin:)``.
    package func add(_ milliseconds: Double, sentAt: Double) {
        samples.withLock {
            $0.values.append(milliseconds)
            $0.timed.append((sentAt, milliseconds))
        }
    }

    /// Forgets every sample.
    package func reset() { samples.withLock { $0 = Samples() } }

    /// The samples given with ``add(_:sentAt:)`` split by whether their operation met one of the host's slow
    /// `episodes`; `origin` is the load clock's zero in the episodes' clock.
    package func split(by episodes: HostEpisodes, origin: Double) -> (clear: LatencySamples, met: LatencySamples) {
        let clear = LatencySamples()
        let met = LatencySamples()
        for (sentAt, milliseconds) in samples.withLock({ $0.timed }) {
            let began = origin + sentAt
            (episodes.touch(from: began, to: began + milliseconds / 1000) ? met : clear).add(milliseconds)
        }
        return (clear, met)
    }

    /// The samples given with ``add(_:sentAt:)``, a set for each second, in order.
    package func bySecond() -> [(second: Int, samples: LatencySamples)] {
        let bySecond = Dictionary(grouping: samples.withLock { $0.timed }) { Int($0.sentAt) }
        return bySecond.sorted { $0.key < $1.key }.map { second, timed in
            let samples = LatencySamples()
            samples.samples.withLock { $0.values = timed.map(\.milliseconds) }
            return (second, samples)
        }
    }

    /// Records the time from `start` until now, as an operation that began at `start` (``LoadClock``).
    package func add(since start: ContinuousClock.Instant) {
        add(Self.milliseconds(ContinuousClock.now - start), sentAt: LoadClock.seconds(at: start))
    }

    /// The sample at `fraction` (0.99 for p99) of the sorted samples, or nil without samples.
    package func percentile(_ fraction: Double) -> Double? {
        Self.at(fraction, of: samples.withLock { $0.values }.sorted())
    }

    private static func at(_ fraction: Double, of sorted: [Double]) -> Double? {
        sorted.isEmpty ? nil : sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
    }

    /// "p50 … ms, p95 … ms, p99 … ms, max … ms (n=…)".
    package func summary() -> String {
        let sorted = samples.withLock { $0.values }.sorted()
        guard let maximum = sorted.last else { return "no samples" }
        func at(_ fraction: Double) -> String { String(format: "%.2f", Self.at(fraction, of: sorted) ?? 0) }
        return
            "p50 \(at(0.5)) ms, p95 \(at(0.95)) ms, p99 \(at(0.99)) ms, max \(String(format: "%.2f", maximum)) ms (n=\(sorted.count))"
    }

    package static func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }
}
