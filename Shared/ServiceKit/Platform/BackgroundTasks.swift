import Logging
import Metrics
import ServiceLifecycle
import Synchronization

/// Work a request or an event starts but should not wait for (publishing a position, asking a provider for an
/// ETA), run by a service of the service group rather than by tasks nobody owns: at most `concurrency` jobs at
/// once, at most `capacity` waiting. A job submitted when the queue is full is dropped, counted in
/// `background_tasks_dropped_total{queue}` and logged. At graceful shutdown the running jobs get `shutdownGrace` to
/// finish and are then cancelled (a job waiting for a database that is down must not hold the process); those
/// still waiting, and any submitted later, are dropped and counted (callers queue only work that may be lost or
/// that is kept elsewhere, such as deliveries due in Postgres).
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

    package init(
        name: String, capacity: Int = 1024, concurrency: Int = 16, shutdownGrace: Duration = .seconds(3),
        logger: Logger
    ) {
        precondition(capacity > 0 && concurrency > 0, "capacity and concurrency must be positive")
        self.name = name
        self.concurrency = concurrency
        self.shutdownGrace = shutdownGrace
        (jobs, queue) = AsyncStream.makeStream(of: Job.self, bufferingPolicy: .bufferingOldest(capacity))
        dropped = Counter(label: "background_tasks_dropped_total", dimensions: [("queue", name)])
        self.logger = logger
    }

    /// Queues `job`; false (and counted) if the queue is full or the service stopped.
    @discardableResult
    package func submit(_ job: @escaping Job) -> Bool {
        switch queue.yield(job) {
        case .enqueued: return true
        case .dropped, .terminated:
            dropped.increment()
            logger.warning("background job dropped: the queue is full or stopped", metadata: ["queue": "\(name)"])
            return false
        @unknown default: return false
        }
    }

    /// Runs queued jobs until graceful shutdown, then gives the running ones `shutdownGrace` to finish, cancels
    /// those still running, and drops the others.
    package func run() async throws {
        await withGracefulShutdownHandler {
            // A child task ends with false when it was a job, true when it was the shutdown grace running out.
            await withTaskGroup(of: Bool.self) { group in
                var running = 0
                var droppedAtShutdown = 0
                for await job in jobs {
                    if running == concurrency, !stopping.load(ordering: .relaxed) {
                        _ = await group.next()
                        running -= 1
                    }
                    guard !stopping.load(ordering: .relaxed) else {
                        droppedAtShutdown += 1
                        continue
                    }
                    group.addTask {
                        await job()
                        return false
                    }
                    running += 1
                }
                if running > 0 {
                    group.addTask { [shutdownGrace] in (try? await Task.sleep(for: shutdownGrace)) != nil }
                    while running > 0, let graceRanOut = await group.next() {
                        if graceRanOut {
                            logger.warning(
                                "background jobs cancelled at shutdown",
                                metadata: ["queue": "\(name)", "jobs": "\(running)"])
                            break
                        }
                        running -= 1
                    }
                    group.cancelAll()
                }
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
