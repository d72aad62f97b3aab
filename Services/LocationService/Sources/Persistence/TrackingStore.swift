import Contracts
import Foundation
import Logging
import PostgresNIO
import ServiceKit

extension JobKind: PostgresTextEnum {}
extension JobPhase: PostgresTextEnum {}
extension TrackingState: PostgresTextEnum {}
extension TrackingStopReason: PostgresTextEnum {}

/// Location's SQL: the `tracking_jobs` table. Every method runs on the caller's connection, in its transaction;
/// no decisions here (those are ``TrackingRules`` and ``TrackingWorkflow``).
package struct TrackingStore: Sendable {
    let logger: Logger

    package init(logger: Logger) { self.logger = logger }

    private static let columns = """
        job_id, kind, customer_id, courier_id, destination_lat, destination_lng, destination_label, phase,
        travel_mode, travel_mode_since, state, end_reason, tracking_started_at, version
        """

    /// The job `jobId`, locked for the transaction when `forUpdate`.
    package func job(_ jobId: String, forUpdate: Bool = false, on connection: PostgresConnection) async throws
        -> TrackingJob?
    {
        var query: PostgresQuery = "SELECT \(unescaped: Self.columns) FROM tracking_jobs WHERE job_id = \(jobId)"
        if forUpdate { query.sql += " FOR UPDATE" }
        return try await jobs(query, on: connection).first
    }

    /// Every job being tracked now (live or stale).
    package func trackedJobs(on connection: PostgresConnection) async throws -> [TrackingJob] {
        try await jobs(
            "SELECT \(unescaped: Self.columns) FROM tracking_jobs WHERE state IN ('live', 'stale')", on: connection)
    }

    /// The jobs of courier `courierId` being tracked now (live or stale).
    package func trackedJobs(ofCourier courierId: String, on connection: PostgresConnection) async throws
        -> [TrackingJob]
    {
        try await jobs(
            """
            SELECT \(unescaped: Self.columns) FROM tracking_jobs
            WHERE courier_id = \(courierId) AND state IN ('live', 'stale')
            """, on: connection)
    }

    /// Tells every instance listening on `channel`, at the commit, that instance `instanceId` changed a job of
    /// courier `courierId` (the payload: the two, tab-separated).
    package func notifyJobChanged(
        courierId: String, instanceId: String, channel: String, on connection: PostgresConnection
    ) async throws {
        let payload = "\(instanceId)\t\(courierId)"
        try await connection.queryWhileOpen("SELECT pg_notify(\(channel), \(payload))", logger: logger)
    }

    /// Up to `limit` jobs tracked or in travel mode since `cutoff` or earlier, locked (skipping locked ones).
    package func overdueJobIds(since cutoff: Date, limit: Int, on connection: PostgresConnection) async throws
        -> [String]
    {
        let rows = try await connection.queryWhileOpen(
            """
            SELECT job_id FROM tracking_jobs
            WHERE (travel_mode AND travel_mode_since <= \(cutoff))
               OR (kind = 'delivery' AND state IN ('live', 'stale') AND tracking_started_at <= \(cutoff))
            LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """, logger: logger
        )
        var ids: [String] = []
        for try await jobId in rows.decode(String.self) { ids.append(jobId) }
        return ids
    }

    /// Adds `job` unless a job with its id exists.
    package func insert(_ job: TrackingJob, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            INSERT INTO tracking_jobs (job_id, kind, customer_id, courier_id, destination_lat, destination_lng,
                                       destination_label, phase, state)
            VALUES (\(job.jobId), \(job.kind), \(job.customerId), \(job.courierId), \(job.destination.lat),
                    \(job.destination.lng), \(job.destination.label), \(job.phase), \(job.state))
            ON CONFLICT (job_id) DO NOTHING
            """, logger: logger
        )
    }

    /// Writes every field of `job` that may change (the job is locked: its version is the one read, counted up).
    package func save(_ job: TrackingJob, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            UPDATE tracking_jobs SET courier_id = \(job.courierId), destination_lat = \(job.destination.lat),
                   destination_lng = \(job.destination.lng), destination_label = \(job.destination.label),
                   phase = \(job.phase), travel_mode = \(job.travelMode), travel_mode_since = \(job.travelModeSince),
                   state = \(job.state), end_reason = \(job.endReason), tracking_started_at = \(job.trackingStartedAt),
                   version = \(job.version), updated_at = now()
            WHERE job_id = \(job.jobId)
            """, logger: logger
        )
    }

    private func jobs(_ query: PostgresQuery, on connection: PostgresConnection) async throws -> [TrackingJob] {
        let rows = try await connection.queryWhileOpen(query, logger: logger)
        var jobs: [TrackingJob] = []
        for try await row in rows.decode(
            (
                String, JobKind, String, String?, Double, Double, String, JobPhase, Bool, Date?, TrackingState,
                TrackingStopReason?, Date?, Int
            ).self
        ) {
            var job = TrackingJob(
                jobId: row.0, kind: row.1, customerId: row.2, courierId: row.3,
                destination: Destination(lat: row.4, lng: row.5, label: row.6))
            job.phase = row.7
            job.travelMode = row.8
            job.travelModeSince = row.9
            job.state = row.10
            job.endReason = row.11
            job.trackingStartedAt = row.12
            job.version = row.13
            jobs.append(job)
        }
        return jobs
    }
}
