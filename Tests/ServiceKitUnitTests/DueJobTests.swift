import Logging
import RealtimeTesting
import ServiceKit
import Synchronization
import Testing

@Suite("Due jobs")
struct DueJobTests {
    /// A job whose rounds are counted and answer, in turn, what `answers` holds (nil once it runs out).
    final class Rounds: Sendable {
        private let state = Mutex<(count: Int, answers: [Duration?])>((0, []))
        init(_ answers: [Duration?]) { state.withLock { $0.answers = answers } }
        var count: Int { state.withLock { $0.count } }
        func round() -> Duration? {
            state.withLock { state in
                state.count += 1
                return state.answers.isEmpty ? nil : state.answers.removeFirst()
            }
        }
    }

    static func start(_ rounds: Rounds, activity: Activity, every interval: Duration) -> Task<Void, any Error> {
        let job = DueJob(
            every: interval, atLeastEvery: .seconds(600), activity: activity, failure: "round failed",
            logger: Logger(label: "due-job-tests")
        ) { rounds.round() }
        return Task { try await job.run() }
    }

    @Test("a quiet job sleeps past its interval; activity wakes it, and so does the due time a round returned")
    func wakesOnActivityAndWhenDue() async throws {
        let activity = Activity()
        // Round 2 says work is due in 100 ms; the others know of none (the job would sleep 10 minutes).
        let rounds = Rounds([nil, .milliseconds(100), nil])
        let job = Self.start(rounds, activity: activity, every: .milliseconds(10))
        defer { job.cancel() }
        try await eventually(timeout: .seconds(10), "the first round") { rounds.count == 1 }
        try await Task.sleep(for: .milliseconds(300))
        #expect(rounds.count == 1, "no round while nothing is due and nothing happened")
        activity.happened()
        try await eventually(timeout: .seconds(10), "a round after activity") { rounds.count >= 2 }
        try await eventually(timeout: .seconds(10), "a round when its work is due") { rounds.count >= 3 }
        try await Task.sleep(for: .milliseconds(300))
        #expect(rounds.count == 3)
    }

    @Test("activity however frequent runs a round at most once per interval")
    func activityIsRateLimited() async throws {
        let activity = Activity()
        let rounds = Rounds([])
        let job = Self.start(rounds, activity: activity, every: .milliseconds(200))
        defer { job.cancel() }
        let start = ContinuousClock.now
        while ContinuousClock.now - start < .seconds(1) {
            activity.happened()
            try await Task.sleep(for: .milliseconds(5))
        }
        // Rounds at 200, 400, 600, 800 and 1000 ms at the most, and one that may have begun as the pokes stopped.
        #expect(rounds.count <= 6)
        try await eventually(timeout: .seconds(10), "a round after the activity") { rounds.count >= 1 }
    }

    @Test("a cancelled job returns while it sleeps")
    func cancelledWhileAsleep() async throws {
        let rounds = Rounds([])
        let job = Self.start(rounds, activity: Activity(), every: .milliseconds(10))
        try await eventually(timeout: .seconds(10), "the first round") { rounds.count == 1 }
        job.cancel()
        try await job.value
    }
}
