import Foundation
import Logging
import ServiceKit
import Synchronization

/// Attempts deliveries with at most `concurrency` provider calls at once (on a ``BackgroundTasks`` queue the
/// service group runs), so one slow call never holds up the rest. Deliveries are queued by id, once each; the
/// attempt leases the row, so two instances never send the same delivery at the same time. A delivery that does
/// not fit in the queue stays due in Postgres and is queued again by the next look for due deliveries.
package final class PushDispatcher: Sendable {
    let workflow: DeliveryWorkflow
    let database: Database
    let providers: [DevicePlatform: any PushProvider]
    let attempts: BackgroundTasks
    let logger: Logger
    private let queued = Mutex<Set<Int64>>([])

    package init(
        workflow: DeliveryWorkflow, database: Database, providers: [DevicePlatform: any PushProvider],
        attempts: BackgroundTasks, logger: Logger
    ) {
        self.workflow = workflow
        self.database = database
        self.providers = providers
        self.attempts = attempts
        self.logger = logger
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
            let leasedAt = workflow.now()
            guard let attempt = try await database.transaction({ try await workflow.lease(id, on: $0) }) else { return }
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

    /// Records what the provider made of an attempt, trying again while the database is unavailable and the lease
    /// holds: a record lost to a Postgres restart would have the provider called again once the lease ran out.
    private func record(_ attempt: NotificationStore.Attempt, outcome: PushOutcome, before deadline: Date) async throws
    {
        var backoff = Duration.milliseconds(100)
        while true {
            do {
                try await database.transaction { try await workflow.record(attempt, outcome: outcome, on: $0) }
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
