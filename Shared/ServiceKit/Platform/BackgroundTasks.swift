import Logging
import Metrics
import ServiceLifecycle
import Synchronization

/// Work a request or an event starts but should not wait for (publishing a position, asking a provider for an
/// ETA), run by a service of the service group rather than by tasks nobody owns: at most `concurrency` jobs at
/// once, at most `capacity` waiting. A job submitted when the queue is full is dropped, counted in
/// `background_tasks_dropped_total{queue}` and logged. At graceful shutdown the running jobs finish; those still
/// waiting, and any submitted later, are dropped and counted (callers queue only work that may be lost or that
/// is kept elsewhere, such as deliveries due in Postgres).
package final class BackgroundTasks: Service, Sendable {
    package typealias Job = @Sendable () async -> Void

    package let name: String
    private let concurrency: Int
    private let jobs: AsyncStream<Job>
    private let queue: AsyncStream<Job>.Continuation
    private let dropped: Counter
    private let stopping = Atomic<Bool>(false)
    private let logger: Logger

    package init(name: String, capacity: Int = 1024, concurrency: Int = 16, logger: Logger) {
        precondition(capacity > 0 && concurrency > 0, "capacity and concurrency must be positive")
        self.name = name
        self.concurrency = concurrency
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

    /// Runs queued jobs until graceful shutdown, then lets the running ones finish and drops the others.
    package func run() async throws {
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                var running = 0
                var droppedAtShutdown = 0
                for await job in jobs {
                    if running == concurrency, !stopping.load(ordering: .relaxed) {
                        await group.next()
                        running -= 1
                    }
                    guard !stopping.load(ordering: .relaxed) else {
                        droppedAtShutdown += 1
                        continue
                    }
                    group.addTask { await job() }
                    running += 1
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
