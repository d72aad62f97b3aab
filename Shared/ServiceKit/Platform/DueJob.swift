import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization

/// Something happened in the service that may have added work with a due time: an event applied, a write request
/// answered. ``DueJob``s listen, so they run soon after activity and sleep while the service is at rest.
package final class Activity: Sendable {
    private let listeners = Mutex<[@Sendable () -> Void]>([])

    package init() {}

    /// Tells every listener.
    package func happened() {
        for listener in listeners.withLock({ $0 }) { listener() }
    }

    /// Calls `listener` on every ``happened()`` from now on.
    package func listen(_ listener: @escaping @Sendable () -> Void) { listeners.withLock { $0.append(listener) } }
}

/// Tells ``Activity`` about every request other than a read, once answered.
struct ActivityMiddleware<Context: RequestContext>: RouterMiddleware {
    let activity: Activity

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        defer {
            if ![.get, .head, .options].contains(request.method) { activity.happened() }
        }
        return try await next(request, context)
    }
}

/// A wake-up call for one waiting task: ``wait(until:)`` returns at the deadline, or as soon as ``poke()`` was
/// called since the last wait returned.
final class Wakeup: Sendable {
    private struct State {
        var poked = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    func poke() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.poked = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns at `deadline`, on a poke, or when the task is cancelled.
    func wait(until deadline: ContinuousClock.Instant) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { if (try? await Task.sleep(until: deadline)) != nil { self.poke() } }
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let poked = state.withLock { state in
                        if state.poked {
                            state.poked = false
                            return true
                        }
                        state.waiter = continuation
                        return false
                    }
                    if poked { continuation.resume() }
                }
            } onCancel: {
                poke()
            }
            group.cancelAll()
        }
    }
}

/// Runs `work` when work is due rather than on every tick: a round returns how long until its earliest due work
/// (nil for none), and the next runs then, at most `idleInterval` later (work other instances added), or
/// `interval` after ``Activity`` (work this instance may have added), whichever comes first, and never sooner than
/// `interval` after the last round. A failing round is logged with `failure` and retried after `interval`.
package struct DueJob: Service {
    let interval: Duration
    let idleInterval: Duration
    let failure: String
    let logger: Logger
    let work: @Sendable () async throws -> Duration?
    private let wakeup = Wakeup()

    package init(
        every interval: Duration, atLeastEvery idleInterval: Duration, activity: Activity, failure: String,
        logger: Logger, _ work: @escaping @Sendable () async throws -> Duration?
    ) {
        self.interval = interval
        self.idleInterval = max(idleInterval, interval)
        self.failure = failure
        self.logger = logger
        self.work = work
        activity.listen { [wakeup] in wakeup.poke() }
    }

    package func run() async throws {
        await cancelWhenGracefulShutdown {
            var lastRound = ContinuousClock.now
            var next = lastRound + interval
            while !Task.isCancelled {
                await wakeup.wait(until: next)
                guard (try? await Task.sleep(until: lastRound + interval)) != nil else { return }
                lastRound = .now
                do {
                    let due = try await work() ?? idleInterval
                    next = lastRound + min(max(due, .zero), idleInterval)
                } catch {
                    logger.warning("\(failure)", metadata: ["error": "\(error)"])
                    next = lastRound + interval
                }
            }
        }
    }
}

extension ServicePlatform {
    /// Adds a ``DueJob`` woken by the platform's ``Activity``.
    package mutating func addDueJob(
        every interval: Duration, atLeastEvery idleInterval: Duration, failure: String,
        _ work: @escaping @Sendable () async throws -> Duration?
    ) {
        addService(
            DueJob(
                every: interval, atLeastEvery: idleInterval, activity: activity, failure: failure, logger: logger, work)
        )
    }
}
