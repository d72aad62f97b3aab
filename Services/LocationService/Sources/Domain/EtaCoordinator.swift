import Contracts
import Foundation
import Logging
import ServiceKit
import Synchronization

/// Each tracked job's last ETA, when it is due again (every `etaRefresh`, or after a significant move), and the
/// provider behind a circuit breaker. When the provider fails the answer is "ETA unavailable".
package final class EtaCoordinator: Sendable {
    private struct JobEta {
        var update: EtaUpdate?
        var computedAt: Date?
        var from: GeoPoint?
        var inFlight = false
    }

    private let jobs = Mutex<[String: JobEta]>([:])
    let provider: any EtaProvider
    let breaker: CircuitBreaker
    let refresh: TimeInterval
    let significantMoveMeters: Double
    let now: Now
    let logger: Logger

    package init(provider: any EtaProvider, settings: LocationSettings, now: Now, logger: Logger) {
        self.provider = provider
        self.breaker = CircuitBreaker(failureThreshold: settings.breakerFailures, openFor: settings.breakerOpen)
        self.refresh = settings.etaRefresh.timeInterval
        self.significantMoveMeters = settings.etaSignificantMoveMeters
        self.now = now
        self.logger = logger
    }

    /// Whether the job's ETA is due from `point` (none yet, old, or the courier moved far); if so the caller
    /// computes it and nobody else does meanwhile.
    func claim(_ jobId: String, at point: GeoPoint) -> Bool {
        let now = self.now()
        return jobs.withLock { jobs in
            var entry = jobs[jobId] ?? JobEta()
            guard !entry.inFlight else { return false }
            let due =
                entry.computedAt.map { now.timeIntervalSince($0) >= refresh } ?? true
                || (entry.from.map { $0.meters(to: point) >= significantMoveMeters } ?? true)
            guard due else { return false }
            entry.inFlight = true
            jobs[jobId] = entry
            return true
        }
    }

    /// Computes the job's ETA from `from` (after ``claim(_:at:)``) and remembers it.
    func compute(_ job: TrackingJob, from: GeoPoint, learnedSpeedMps: Double?) async -> EtaUpdate {
        let now = self.now()
        let update: EtaUpdate
        do {
            let estimate = try await breaker.run {
                try await provider.estimate(from: from, to: job.destination.point, learnedSpeedMps: learnedSpeedMps)
            }
            update = .available(jobId: job.jobId, kind: job.kind, estimate: estimate, now: now)
        } catch {
            logger.warning("no ETA from the provider", metadata: ["job.id": "\(job.jobId)", "error": "\(error)"])
            update = .unavailable(jobId: job.jobId)
        }
        jobs.withLock { jobs in
            // Forgotten meanwhile (tracking ended): stay forgotten.
            guard jobs[job.jobId] != nil else { return }
            jobs[job.jobId] = JobEta(update: update, computedAt: now, from: from, inFlight: false)
        }
        return update
    }

    /// The last ETA, or a fresh one if none is known here (a watcher joining this instance).
    func latest(_ job: TrackingJob, from: GeoPoint, learnedSpeedMps: Double?) async -> EtaUpdate {
        if let known = jobs.withLock({ $0[job.jobId]?.update }) { return known }
        guard claim(job.jobId, at: from) else {
            return jobs.withLock { $0[job.jobId]?.update } ?? .unavailable(jobId: job.jobId)
        }
        return await compute(job, from: from, learnedSpeedMps: learnedSpeedMps)
    }

    func forget(_ jobId: String) { _ = jobs.withLock { $0.removeValue(forKey: jobId) } }

    /// Gives up a claim whose computation will not run, so the job's next position may claim it.
    func release(_ jobId: String) { jobs.withLock { $0[jobId]?.inFlight = false } }
}
