import Foundation
import Logging
import Metrics
import ServiceLifecycle
import Synchronization

/// Work a request or an event starts but should not wait for (publishing a position, asking a provider for an
/// ETA), run by a service of the service group rather than by tasks nobody owns: at most `concurrency` jobs at
/// once, at most `capacity` waiting. A job submitted when the queue is full is dropped and counted in
/// `background_tasks_dropped_total{queue}`; a warning says so at most once every ``dropWarningInterval``, with how
/// many were dropped since the last (a warning for each drop flooded an overloaded service's log, and cost it CPU).
/// At graceful shutdown the running jobs get `shutdownGrace` to finish and are then cancelled (a job waiting for a
/// database that is down must not hold the process); those still waiting, and any submitted later, are dropped and
/// counted (callers queue only work that may be lost or that is kept elsewhere, such as deliveries due in Postgres).
package final class BackgroundTasks: Service, Sendable {
    package typealias Job = @Sendable () async -> Void

    package let name: String
    private let concurrency: Int
    private let shutdownGrace: Duration
    private let jobs: AsyncStream<Job>
    private let queue: AsyncStream<Job>.Continuation
    private let dropped: Counter
    private let stopping = Atomic<Bool>(false)
    private let logger: Logger
    private let now: Now
    /// Drops since the last warning about them, and when that warning was written.
    private let unreportedDrops = Mutex<(count: Int, lastWarning: Date?)>((0, nil))

    /// The least time between two warnings about dropped jobs.
    package static let dropWarningInterval: Duration = .seconds(10)

    package init(
        name: String, capacity: Int = 1024, concurrency: Int = 16, shutdownGrace: Duration = .seconds(3),
        now: Now = .system, logger: Logger
    ) {
        precondition(capacity > 0 && concurrency > 0, "capacity and concurrency must be positive")
        self.name = name
        self.concurrency = concurrency
        self.shutdownGrace = shutdownGrace
        (jobs, queue) = AsyncStream.makeStream(of: Job.self, bufferingPolicy: .bufferingOldest(capacity))
        dropped = Counter(label: "background_tasks_dropped_total", dimensions: [("queue", name)])
        self.logger = logger
        self.now = now
    }

    /// Queues `job`; false (and counted) if the queue is full or the service stopped.
    @discardableResult
    package func submit(_ job: @escaping Job) -> Bool {
        switch queue.yield(job) {
        case .enqueued: return true
        case .dropped, .terminated:
            dropped.increment()
            reportDrop()
            return false
        @unknown default: return false
        }
    }

    /// Counts a dropped job and warns about the drops so far unless a warning was written in the last
    /// ``dropWarningInterval``.
    private func reportDrop() {
        let time = now()
        let drops = unreportedDrops.withLock { state -> Int? in
            state.count += 1
            if let last = state.lastWarning, time.timeIntervalSince(last) < Self.dropWarningInterval.timeInterval {
                return nil
            }
            defer { state = (0, time) }
            return state.count
        }
        guard let drops else { return }
        logger.warning(
            "background jobs dropped: the queue is full or stopped",
            metadata: ["queue": "\(name)", "jobs": "\(drops)"])
    }

    /// What ended a child task of ``run()``.
    private enum Ended {
        case job
        /// The shutdown grace ran out: the jobs still running are cancelled.
        case grace
        /// The grace timer was cancelled (the jobs ended first, or the service itself was cancelled).
        case timerCancelled
    }

    /// Runs queued jobs until graceful shutdown, then gives the running ones `shutdownGrace` to finish, cancels
    /// those still running, and drops the others.
    package func run() async throws {
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Ended.self) { group in
                // Armed from the start, so a wait for a free slot below ends with the grace too.
                group.addTask { [shutdownGrace] in
                    do {
                        try await gracefulShutdown()
                        try await Task.sleep(for: shutdownGrace)
                        return .grace
                    } catch {
                        return .timerCancelled
                    }
                }
                var running = 0
                var graceOver = false
                var droppedAtShutdown = 0
                /// Waits for one child; false once the grace is over (or the timer gone).
                func awaitJob() async -> Bool {
                    switch await group.next() {
                    case .job:
                        running -= 1
                        return true
                    case .grace, .timerCancelled, nil:
                        graceOver = true
                        return false
                    }
                }
                for await job in jobs {
                    if running == concurrency, !stopping.load(ordering: .relaxed), !graceOver {
                        _ = await awaitJob()
                    }
                    guard !stopping.load(ordering: .relaxed), !graceOver else {
                        droppedAtShutdown += 1
                        continue
                    }
                    group.addTask {
                        await job()
                        return .job
                    }
                    running += 1
                }
                while running > 0, !graceOver, await awaitJob() {}
                if running > 0 {
                    logger.warning(
                        "background jobs cancelled at shutdown", metadata: ["queue": "\(name)", "jobs": "\(running)"])
                }
                group.cancelAll()
                if droppedAtShutdown > 0 {
                    dropped.increment(by: droppedAtShutdown)
                    logger.info(
                        "background jobs dropped at shutdown",
                        metadata: ["queue": "\(name)", "jobs": "\(droppedAtShutdown)"])
                }
            }
        } onGracefulShutdown: {
            self.stopping.store(true, ordering: .relaxed)
            self.queue.finish()
        }
    }
}
