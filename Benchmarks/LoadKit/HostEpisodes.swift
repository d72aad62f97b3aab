import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The episodes in which the host ran this machine several times slower than usual, as `Benchmarks/host.py`
/// recorded them beside a benchmark (`BENCH_HOST_PROBE=1`): seconds of CLOCK_BOOTTIME, one "start end" line each.
package struct HostEpisodes: Sendable {
    /// The episodes, in order.
    package let spans: [ClosedRange<Double>]

    package init(spans: [ClosedRange<Double>]) { self.spans = spans }

    /// The episodes in the file `BENCH_HOST_EPISODES` names, or nil when it names none.
    package static func recorded() -> HostEpisodes? {
        guard let path = ProcessInfo.processInfo.environment["BENCH_HOST_EPISODES"],
            let text = try? String(contentsOfFile: path, encoding: .utf8)
        else { return nil }
        let spans = text.split(separator: "\n").compactMap { line -> ClosedRange<Double>? in
            let fields = line.split(separator: " ").compactMap { Double($0) }
            guard fields.count == 2, fields[0] <= fields[1] else { return nil }
            return fields[0]...fields[1]
        }
        return HostEpisodes(spans: spans)
    }

    /// Now, in seconds of CLOCK_BOOTTIME, the probe's clock.
    package static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// How many episodes overlapped the span from `began` to `ended`, and for how many seconds of it.
    package func coverage(from began: Double, to ended: Double) -> (count: Int, seconds: Double) {
        let overlaps = spans.map { min($0.upperBound, ended) - max($0.lowerBound, began) }.filter { $0 > 0 }
        return (overlaps.count, overlaps.reduce(0, +))
    }

    /// Whether an operation from `began` to `ended` overlapped an episode or the `settling` seconds after one,
    /// while the work it held up is caught up on.
    package func touch(from began: Double, to ended: Double, settling: Double = 0.05) -> Bool {
        spans.contains { began <= $0.upperBound + settling && ended >= $0.lowerBound }
    }
}

extension LatencySamples {
    /// With the host probe's episodes recorded (`BENCH_HOST_PROBE=1`), how much of `window` they covered and these
    /// samples (`what`) split by whether they met one; nil without them. `origin` (the samples' zero) and `window`
    /// are in the probe's clock.
    package func hostEpisodesReport(
        _ what: String, origin: Double = LoadClock.originBoottime, window: ClosedRange<Double>
    ) -> String? {
        guard let episodes = HostEpisodes.recorded() else { return nil }
        let (count, seconds) = episodes.coverage(from: window.lowerBound, to: window.upperBound)
        let share = String(format: "%.1f", 100 * seconds / max(window.upperBound - window.lowerBound, 1e-9))
        let (clear, met) = split(by: episodes, origin: origin)
        return "the host's slow episodes meanwhile: \(count), \(share)% of the time; \(what) that met one "
            + "(or the 50 ms after one): \(met.summary()); the rest: \(clear.summary())"
    }
}
