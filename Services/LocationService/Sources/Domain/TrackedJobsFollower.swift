import Logging
import PostgresNIO
import ServiceKit
import ServiceLifecycle

/// Listens for the job changes every instance announces at their commit (``TrackingWorkflow/jobsChannel``), so that
/// a job another instance started gets this instance's positions at once: otherwise they went to no watcher until
/// the next tick reloaded the tracked jobs. This instance's own changes are tracked as they commit, so their notices
/// are skipped. While the connection is lost, the ticks still reload the jobs.
struct TrackedJobsFollower: Service {
    let hub: TrackingHub
    let database: Database
    let channel: String
    let instanceId: String
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await database.client.withConnection { connection in
                        try await connection.listen(on: channel) { notifications in
                            for try await notification in notifications {
                                let fields = notification.payload.split(
                                    separator: "\t", maxSplits: 1, omittingEmptySubsequences: false)
                                guard fields.count == 2, fields[0] != instanceId else { continue }
                                await learn(String(fields[1]))
                            }
                        }
                    }
                } catch {
                    if Task.isCancelled { return }
                    logger.warning("lost the tracked jobs' notices; listening again", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    private func learn(_ courierId: String) async {
        do {
            try await hub.learnJobs(ofCourier: courierId)
        } catch {
            logger.warning(
                "could not read a courier's tracked jobs",
                metadata: ["courier.id": "\(courierId)", "error": "\(error)"])
        }
    }
}
