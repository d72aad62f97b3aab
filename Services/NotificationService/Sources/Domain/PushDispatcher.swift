import Foundation
import Logging
import PostgresNIO
import ServiceKit
import Synchronization

/// Attempts deliveries with at most `concurrency` provider calls at once (on a ``BackgroundTasks`` queue the
/// service group runs), so one slow call never holds up the rest. Deliveries are queued by id, once each; the
/// attempt leases the row, so two instances never send the same delivery at the same time. Leases and outcomes are
/// written in groups: one transaction for all the attempts starting (or ending) at that moment. A delivery that does
/// not fit in the queue stays due in Postgres and is queued again by the next look for due deliveries.
package final class PushDispatcher: Sendable {
    let workflow: DeliveryWorkflow
    let database: Database
    let providers: [DevicePlatform: any PushProvider]
    let attempts: BackgroundTasks
    let logger: Logger
    /// Told once an outcome is recorded (a retry may now be due).
    let activity: Activity
    private let queued = Mutex<Set<Int64>>([])
    /// Leases for the attempts starting, taken together.
    private let leases: GroupedTransactions<Int64, (NotificationStore.Attempt, leasedAt: Date)?>
    /// The provider's answers, recorded together.
    private let outcomes: GroupedTransactions<(NotificationStore.Attempt, PushOutcome), Void>

    package init(
        workflow: DeliveryWorkflow, database: Database, providers: [DevicePlatform: any PushProvider],
        attempts: BackgroundTasks, activity: Activity, logger: Logger
    ) {
        self.activity = activity
        self.workflow = workflow
        self.database = database
        self.providers = providers
        self.attempts = attempts
        self.logger = logger
        self.leases = GroupedTransactions(database: database, limit: 256, singleStatement: true) { ids, connection in
            let (attempts, leasedAt) = try await workflow.lease(ids, on: connection)
            let byId = Dictionary(attempts.map { ($0.deliveryId, $0) }, uniquingKeysWith: { first, _ in first })
            return ids.map { id in byId[id].map { ($0, leasedAt) } }
        }
        self.outcomes = GroupedTransactions(database: database, limit: 256) { outcomes, connection in
            try await workflow.record(outcomes.map { (attempt: $0.0, outcome: $0.1) }, on: connection)
            return outcomes.map { _ in () }
        }
    }

    /// Queues deliveries for an attempt (those already queued are not queued twice).
    package func enqueue(_ ids: [Int64]) {
        let fresh = queued.withLock { queued in ids.filter { queued.insert($0).inserted } }
        for id in fresh where !attempts.submit({ await self.attempt(id) }) {
            _ = queued.withLock { $0.remove(id) }
        }
    }

    private func attempt(_ id: Int64) async {
        defer { _ = queued.withLock { $0.remove(id) } }
        do {
            guard let (attempt, leasedAt) = try await leases.run(id) else { return }
            guard let provider = providers[attempt.platform] else { return }
            let outcome = await provider.send(attempt.message, to: attempt.token)
            try await record(
                attempt, outcome: outcome,
                before: leasedAt + (DeliveryRules.lease(timeout: workflow.settings.timeout) - .seconds(2)))
        } catch {
            // The lease runs out and the delivery is attempted again.
            logger.warning("could not attempt a push", metadata: ["delivery.id": "\(id)", "error": "\(error)"])
        }
    }

    /// Records what the provider made of an attempt: with the other attempts' outcomes waiting at that moment
    /// (one transaction), else alone, trying again while the database is unavailable and the lease holds: a record
    /// lost to a Postgres restart would have the provider called again once the lease ran out.
    private func record(_ attempt: NotificationStore.Attempt, outcome: PushOutcome, before deadline: Date) async throws
    {
        defer { activity.happened() }
        if (try? await outcomes.run((attempt, outcome))) != nil { return }
        var backoff = Duration.milliseconds(100)
        while true {
            do {
                try await database.transaction { try await workflow.record([(attempt, outcome)], on: $0) }
                return
            } catch  where Database.isUnavailable(error) && workflow.now() + backoff < deadline {
                logger.notice(
                    "could not record a push's outcome; trying again",
                    metadata: ["delivery.id": "\(attempt.deliveryId)", "error": "\(error)"])
                try await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(2))
            }
        }
    }
}

/// A group's body answered a different number of inputs than it was given (a bug): the group fails as a whole.
struct UnansweredInputs: Error {}

/// Runs one transaction for many callers: a call that arrives while a group is being written waits for the next
/// group, which takes every call waiting by then (up to `limit`). `body` answers each input of a group, in order;
/// a group that fails fails each of its callers. A `singleStatement` body runs without BEGIN and COMMIT around it:
/// its one statement commits on its own.
final class GroupedTransactions<Input: Sendable, Output: Sendable>: Sendable {
    typealias Body = @Sendable ([Input], PostgresConnection) async throws -> [Output]

    private struct Waiting: Sendable {
        var input: Input
        var continuation: CheckedContinuation<Output, any Error>
    }

    private struct State: Sendable {
        var waiting: [Waiting] = []
        var writing = false
    }

    private let database: Database
    private let limit: Int
    private let singleStatement: Bool
    private let body: Body
    private let state = Mutex(State())

    init(database: Database, limit: Int, singleStatement: Bool = false, body: @escaping Body) {
        self.database = database
        self.limit = limit
        self.singleStatement = singleStatement
        self.body = body
    }

    /// Runs `input` with the calls waiting alongside it; throws if their transaction failed.
    func run(_ input: Input) async throws -> Output {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Output, any Error>) in
            let leads = state.withLock { state in
                state.waiting.append(Waiting(input: input, continuation: continuation))
                defer { state.writing = true }
                return !state.writing
            }
            // The first caller writes until no one waits; the others only wait.
            if leads { Task { await self.writeWhileWaiting() } }
        }
    }

    private func writeWhileWaiting() async {
        while true {
            let group = state.withLock { state in
                let group = Array(state.waiting.prefix(limit))
                state.waiting.removeFirst(group.count)
                if group.isEmpty { state.writing = false }
                return group
            }
            if group.isEmpty { return }
            do {
                let write = { @Sendable [body] (connection: PostgresConnection) in
                    let outputs = try await body(group.map(\.input), connection)
                    guard outputs.count == group.count else { throw UnansweredInputs() }
                    return outputs
                }
                let outputs =
                    try await singleStatement ? database.withConnection(write) : database.transaction(write)
                for (waiting, output) in zip(group, outputs) { waiting.continuation.resume(returning: output) }
            } catch {
                for waiting in group { waiting.continuation.resume(throwing: error) }
            }
        }
    }
}
