import Contracts
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import Realtime
import RealtimePlatform
import ServiceKit
import ServiceLifecycle
import Synchronization

/// Runs the deadline rounds. A round that found the database unreachable, or waited over ``outageEvidence`` for a
/// connection (the pool waits while Postgres is down), resumes after the outage
/// (``AllocationWorkflow/resumeAfterOutage(on:)``).
final class DeadlineScheduler: Sendable {
    /// A wait for a connection this long means the database was unreachable, not busy.
    static let outageEvidence: Duration = .seconds(1)

    let database: Database
    let workflow: AllocationWorkflow
    let notifier: RiderNotifier
    private let databaseWasUnreachable = Mutex(false)

    init(database: Database, workflow: AllocationWorkflow, notifier: RiderNotifier) {
        self.database = database
        self.workflow = workflow
        self.notifier = notifier
    }

    /// Runs one round; returns how long until the next deadline it knows of (nil for none).
    func round() async throws -> Duration? {
        let failedBefore = databaseWasUnreachable.withLock { $0 }
        let asked = workflow.now()
        let next: Date?
        do {
            next = try await database.transaction { connection in
                let waited = workflow.now().timeIntervalSince(asked)
                let notices = try await workflow.runDeadlines(
                    afterOutage: failedBefore || waited > Self.outageEvidence.timeInterval, on: connection)
                try await notifier.tell(notices, on: connection)
                return try await workflow.nextDeadline(on: connection)
            }
        } catch {
            if Database.isUnavailable(error) { databaseWasUnreachable.withLock { $0 = true } }
            throw error
        }
        databaseWasUnreachable.withLock { $0 = false }
        return next.map { .seconds($0.timeIntervalSince(workflow.now())) }
    }
}
