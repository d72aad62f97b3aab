import Logging
import RealtimeTesting
import ServiceKit
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing

@Suite("BackgroundTasks: bounded, owned by the service group", .timeLimit(.minutes(1)))
struct BackgroundTasksTests {
    static let logger = TestInfrastructure.logger("background-tasks")

    /// Holds jobs until opened (any number may wait).
    final class Gate: Sendable {
        private let isOpen = Mutex(false)
        func open() { isOpen.withLock { $0 = true } }
        func wait() async {
            while !isOpen.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(5)) }
        }
    }

    /// Counts jobs running at once and the most seen.
    final class Gauge: Sendable {
        private let state = Mutex((running: 0, most: 0, finished: 0))
        func started() {
            state.withLock {
                $0.running += 1; $0.most = max($0.most, $0.running)
            }
        }
        func ended() {
            state.withLock {
                $0.running -= 1; $0.finished += 1
            }
        }
        var most: Int { state.withLock { $0.most } }
        var finished: Int { state.withLock { $0.finished } }
    }

    @Test("at most `concurrency` jobs run at once; every queued job runs")
    func concurrencyBound() async throws {
        let tasks = BackgroundTasks(name: "test", capacity: 100, concurrency: 2, logger: Self.logger)
        let gauge = Gauge()
        let gate = Gate()
        for _ in 0..<10 {
            #expect(
                tasks.submit {
                    gauge.started()
                    await gate.wait()
                    gauge.ended()
                })
        }
        let group = ServiceGroup(services: [tasks], logger: Self.logger)
        try await withThrowingTaskGroup(of: Void.self) { running in
            running.addTask { try await group.run() }
            try await eventually("two jobs running") { gauge.most == 2 }
            gate.open()
            try await eventually("all ten finished") { gauge.finished == 10 }
            #expect(gauge.most == 2)
            await group.triggerGracefulShutdown()
            try await running.waitForAll()
        }
    }

    @Test("a full queue refuses the job instead of growing")
    func capacity() {
        let tasks = BackgroundTasks(name: "test", capacity: 3, concurrency: 1, logger: Self.logger)
        let accepted = (0..<5).map { _ in tasks.submit {} }
        #expect(accepted == [true, true, true, false, false])
    }

    @Test("drops are logged at most once every ten seconds, with how many since the last warning")
    func dropWarnings() {
        let logs = CapturedLogs()
        let clock = ManualClock()
        let tasks = BackgroundTasks(name: "test", capacity: 1, concurrency: 1, now: clock.now, logger: logs.logger)
        #expect(tasks.submit {})
        for _ in 0..<4 { #expect(!tasks.submit {}) }
        clock.advance(by: .seconds(9))
        #expect(!tasks.submit {})
        #expect(logs.messages(at: .warning).count == 1)
        clock.advance(by: .seconds(1))
        #expect(!tasks.submit {})
        #expect(
            logs.messages(at: .warning) == [
                "background jobs dropped: the queue is full or stopped jobs=1 queue=test",
                "background jobs dropped: the queue is full or stopped jobs=5 queue=test",
            ])
    }

    @Test("at shutdown the running job finishes; waiting ones and later ones are dropped, not run")
    func shutdown() async throws {
        let tasks = BackgroundTasks(name: "test", capacity: 10, concurrency: 1, logger: Self.logger)
        let ran = Mutex<[String]>([])
        let started = AsyncQueue<Void>()
        let gate = Gate()
        tasks.submit {
            started.push(())
            await gate.wait()
            ran.withLock { $0.append("first") }
        }
        tasks.submit { ran.withLock { $0.append("waiting") } }
        let group = ServiceGroup(services: [tasks], logger: Self.logger)
        try await withThrowingTaskGroup(of: Void.self) { running in
            running.addTask { try await group.run() }
            _ = try await started.next(timeout: .seconds(10))
            await group.triggerGracefulShutdown()
            // The service sees the shutdown asynchronously: once it refuses new jobs, it has.
            try await eventually("the queue stopped") { !tasks.submit { ran.withLock { $0.append("probe") } } }
            gate.open()
            try await running.waitForAll()
        }
        #expect(ran.withLock { $0 } == ["first"])
        #expect(!tasks.submit { ran.withLock { $0.append("late") } })
    }
}

/// A queue whose jobs may get stuck, shut down and watched.
final class ShutdownRehearsal: Sendable {
    let tasks: BackgroundTasks
    let started = AsyncQueue<Void>()
    let outcome = Mutex<[String]>([])

    init(concurrency: Int) {
        tasks = BackgroundTasks(
            name: "test", capacity: 10, concurrency: concurrency, shutdownGrace: .milliseconds(200),
            logger: BackgroundTasksTests.logger)
    }

    /// Queues a job that waits for something that never comes (a database that is down), until cancelled.
    func submitStuckJob() {
        tasks.submit {
            self.started.push(())
            let cancelled = (try? await Task.sleep(for: .seconds(3600))) == nil
            self.outcome.withLock { $0.append(cancelled ? "stuck job cancelled" : "stuck job finished") }
        }
    }

    /// Runs the queue until `startedJobs` jobs started, shuts it down, and checks it stopped soon after the grace;
    /// returns what the jobs recorded.
    func shutDown(afterStarting startedJobs: Int) async throws -> [String] {
        let group = ServiceGroup(services: [tasks], logger: BackgroundTasksTests.logger)
        try await withThrowingTaskGroup(of: Void.self) { running in
            running.addTask { try await group.run() }
            for _ in 0..<startedJobs { _ = try await started.next(timeout: .seconds(10)) }
            let shutdownAt = ContinuousClock.now
            await group.triggerGracefulShutdown()
            try await running.waitForAll()
            #expect(ContinuousClock.now - shutdownAt < .seconds(5), "the service stopped after the grace")
        }
        return outcome.withLock { $0 }
    }
}

@Suite("BackgroundTasks: a job that does not end at shutdown", .timeLimit(.minutes(1)))
struct BackgroundTasksShutdownGraceTests {
    @Test("a running job still running after the shutdown grace is cancelled, so the service stops")
    func stuckJobCancelled() async throws {
        let rehearsal = ShutdownRehearsal(concurrency: 2)
        rehearsal.submitStuckJob()
        rehearsal.tasks.submit {
            rehearsal.started.push(())
            try? await Task.sleep(for: .milliseconds(50))
            rehearsal.outcome.withLock { $0.append("quick job finished") }
        }
        #expect(try await rehearsal.shutDown(afterStarting: 2) == ["quick job finished", "stuck job cancelled"])
    }

    @Test(
        "a shutdown while every slot holds a stuck job and more wait still ends after the grace; the waiting one is dropped"
    )
    func stuckAtTheConcurrencyLimit() async throws {
        let rehearsal = ShutdownRehearsal(concurrency: 1)
        rehearsal.submitStuckJob()
        rehearsal.tasks.submit { rehearsal.outcome.withLock { $0.append("waiting job ran") } }
        #expect(try await rehearsal.shutDown(afterStarting: 1) == ["stuck job cancelled"])
    }
}
