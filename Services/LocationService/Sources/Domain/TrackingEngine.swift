import Contracts
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// Tracked jobs in Postgres: their lifecycle from orders.events, the technician's travel mode, staleness and the
/// time limit. Every method runs in the caller's transaction and returns the jobs whose state changed, for the
/// watchers to be told once it commits.
package struct TrackingEngine: Sendable {
    let settings: LocationSettings
    let outbox: Outbox
    let logger: Logger

    package init(settings: LocationSettings, outbox: Outbox, logger: Logger) {
        self.settings = settings
        self.outbox = outbox
        self.logger = logger
    }

    // MARK: orders.events

    /// Applies an orders.events event to its job.
    package func apply(orderEvent event: DecodedEvent, on connection: PostgresConnection) async throws -> [TrackingJob]
    {
        let now = Date()
        switch event.payload {
        case let created as OrderCreated:
            try await insert(
                TrackingJob(
                    jobId: created.orderId, kind: .delivery, customerId: created.customerId, courierId: nil,
                    destination: Destination(address: created.deliveryAddress)
                ), on: connection
            )
        case let pickedUp as OrderPickedUp:
            let initial = TrackingJob(
                jobId: pickedUp.orderId, kind: .delivery, customerId: pickedUp.customerId, courierId: pickedUp.rider.id,
                destination: Destination(address: pickedUp.destination)
            )
            return try await change(pickedUp.orderId, creating: initial, on: connection) { job in
                job.courierId = pickedUp.rider.id
                job.destination = Destination(address: pickedUp.destination)
                job.phase = .travelling
                return job.settle(now: now)
            }
        case let delivered as OrderDelivered:
            return try await finish(delivered.orderId, reason: .delivered, now: now, on: connection)
        case let cancelled as OrderCancelled:
            return try await finish(cancelled.orderId, reason: .cancelled, now: now, on: connection)
        case let created as ServiceRequestCreated:
            try await insert(
                TrackingJob(
                    jobId: created.requestId, kind: .serviceRequest, customerId: created.customerId, courierId: nil,
                    destination: Destination(address: created.serviceAddress)
                ), on: connection
            )
        case let assigned as ServiceRequestAssigned:
            let initial = TrackingJob(
                jobId: assigned.requestId, kind: .serviceRequest, customerId: assigned.customerId,
                courierId: assigned.technician.id,
                destination: Destination(address: assigned.serviceAddress)
            )
            return try await change(assigned.requestId, creating: initial, on: connection) { job in
                job.courierId = assigned.technician.id
                return nil
            }
        case let changed as ServiceRequestStatusChanged:
            return try await apply(changed, now: now, on: connection)
        default:
            break
        }
        return []
    }

    private func apply(_ changed: ServiceRequestStatusChanged, now: Date, on connection: PostgresConnection)
        async throws -> [TrackingJob]
    {
        let initial = TrackingJob(
            jobId: changed.requestId, kind: .serviceRequest, customerId: changed.customerId,
            courierId: changed.technician?.id,
            destination: Destination(address: changed.serviceAddress)
        )
        return try await change(changed.requestId, creating: initial, on: connection) { job in
            if let technician = changed.technician { job.courierId = technician.id }
            switch changed.status {
            case .onTheWay:
                job.phase = .travelling
                return job.settle(now: now)
            case .workInProgress:
                job.phase = .finished
                return job.settle(now: now, reason: .arrived)
            case .completed:
                job.phase = .finished
                return job.settle(now: now, reason: .completed)
            case .cancelled:
                job.phase = .finished
                return job.settle(now: now, reason: .cancelled)
            case .requested, .technicianAssigned:
                return nil
            }
        }
    }

    private func finish(_ jobId: String, reason: TrackingStopReason, now: Date, on connection: PostgresConnection)
        async throws
        -> [TrackingJob]
    {
        try await change(jobId, on: connection) { job in
            job.phase = .finished
            return job.settle(now: now, reason: reason)
        }
    }

    // MARK: The technician's travel mode

    /// Switches travel mode on or off; only the job's technician may.
    package func setTravelMode(jobId: String, technicianId: String, active: Bool, on connection: PostgresConnection)
        async throws
        -> TrackingJob
    {
        guard let current = try await job(jobId, forUpdate: true, on: connection), current.kind == .serviceRequest
        else {
            throw APIError.notFound("no service request \(jobId)")
        }
        guard current.courierId == technicianId else {
            throw APIError.forbidden("only the technician assigned to this service request switches its travel mode")
        }
        let now = Date()
        let changed = try await change(jobId, on: connection) { job in
            guard job.travelMode != active else { return nil }
            job.travelMode = active
            job.travelModeSince = active ? now : nil
            return job.settle(now: now, reason: active ? nil : .travelModeOff)
        }
        return changed.first ?? current
    }

    // MARK: Staleness and the time limit

    /// A live job whose courier has been silent past the limit becomes stale; nil if it no longer is live.
    package func markStale(_ jobId: String, on connection: PostgresConnection) async throws -> TrackingJob? {
        try await change(jobId, on: connection) { job in
            guard job.state == .live else { return nil }
            job.state = .stale
            return nil
        }.first
    }

    /// A stale job whose courier spoke again is live again; nil if it was not stale.
    package func markLive(_ jobId: String, on connection: PostgresConnection) async throws -> TrackingJob? {
        try await change(jobId, on: connection) { job in
            guard job.state == .stale else { return nil }
            job.state = .live
            return nil
        }.first
    }

    /// Travel mode on for longer than the limit is switched off (the technician is told by push), and a delivery
    /// tracked that long stops being tracked.
    package func endOverdue(limit: Int = 100, on connection: PostgresConnection) async throws -> [TrackingJob] {
        let cutoff = Date() - settings.maximumTracking
        let rows = try await connection.query(
            """
            SELECT job_id FROM tracking_jobs
            WHERE (travel_mode AND travel_mode_since <= \(cutoff))
               OR (kind = 'delivery' AND state IN ('live', 'stale') AND tracking_started_at <= \(cutoff))
            LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """, logger: logger
        )
        var overdue: [String] = []
        for try await jobId in rows.decode(String.self) { overdue.append(jobId) }
        var ended: [TrackingJob] = []
        let now = Date()
        for jobId in overdue {
            let changed = try await change(jobId, on: connection) { job in
                job.travelMode = false
                job.travelModeSince = nil
                if job.kind == .delivery { job.phase = .finished }
                return job.settle(now: now, reason: .timeLimit)
            }
            for job in changed where job.kind == .serviceRequest {
                guard let technician = job.courierId else { continue }
                try await outbox.enqueue(
                    PushRequested(
                        notificationId: "travel-mode-off-\(job.jobId)-\(Int(now.timeIntervalSince1970))",
                        userId: technician,
                        kind: .travelModeOff, title: "Travel mode switched off",
                        body:
                            "Travel mode was on for \(settings.maximumTracking.components.seconds / 3600) hours, so it was switched off. Switch it on again if you are still on the way.",
                        data: ["link": "app://service-requests/\(job.jobId)", "jobId": job.jobId], priority: .high,
                        collapseKey: nil,
                        ttlSeconds: 3600, sound: nil, correlationId: job.jobId
                    ),
                    aggregateId: technician, on: connection, logger: logger
                )
            }
            ended += changed
        }
        return ended
    }

    // MARK: Rows

    package func job(_ jobId: String, forUpdate: Bool = false, on connection: PostgresConnection) async throws
        -> TrackingJob?
    {
        var query: PostgresQuery = """
            SELECT job_id, kind, customer_id, courier_id, destination_lat, destination_lng, destination_label, phase, travel_mode,
                   travel_mode_since, state, end_reason, tracking_started_at
            FROM tracking_jobs WHERE job_id = \(jobId)
            """
        if forUpdate { query.sql += " FOR UPDATE" }
        return try await jobs(query, on: connection).first
    }

    /// Every job being tracked now (live or stale).
    package func trackedJobs(on connection: PostgresConnection) async throws -> [TrackingJob] {
        try await jobs(
            """
            SELECT job_id, kind, customer_id, courier_id, destination_lat, destination_lng, destination_label, phase, travel_mode,
                   travel_mode_since, state, end_reason, tracking_started_at
            FROM tracking_jobs WHERE state IN ('live', 'stale')
            """, on: connection
        )
    }

    private func jobs(_ query: PostgresQuery, on connection: PostgresConnection) async throws -> [TrackingJob] {
        let rows = try await connection.query(query, logger: logger)
        var jobs: [TrackingJob] = []
        for try await row in rows.decode(
            (String, String, String, String?, Double, Double, String, String, Bool, Date?, String, String?, Date?).self
        ) {
            let (
                jobId, kind, customerId, courierId, lat, lng, label, phase, travelMode, since, state, reason, startedAt
            ) = row
            var job = TrackingJob(
                jobId: jobId, kind: JobKind(rawValue: kind) ?? .delivery, customerId: customerId, courierId: courierId,
                destination: Destination(lat: lat, lng: lng, label: label)
            )
            job.phase = JobPhase(rawValue: phase) ?? .pending
            job.travelMode = travelMode
            job.travelModeSince = since
            job.state = TrackingState(rawValue: state) ?? .notStarted
            job.endReason = reason.flatMap(TrackingStopReason.init(rawValue:))
            job.trackingStartedAt = startedAt
            jobs.append(job)
        }
        return jobs
    }

    private func insert(_ job: TrackingJob, on connection: PostgresConnection) async throws {
        try await connection.query(
            """
            INSERT INTO tracking_jobs (job_id, kind, customer_id, courier_id, destination_lat, destination_lng, destination_label, phase, state)
            VALUES (\(job.jobId), \(job.kind.rawValue), \(job.customerId), \(job.courierId), \(job.destination.lat), \(job.destination.lng),
                    \(job.destination.label), \(job.phase.rawValue), \(job.state.rawValue))
            ON CONFLICT (job_id) DO NOTHING
            """, logger: logger
        )
    }

    /// Locks the job (created as `initial` if missing and given), applies `update`, saves it, and announces a
    /// tracking change. Returns the job if anything about it changed.
    private func change(
        _ jobId: String, creating initial: TrackingJob? = nil, on connection: PostgresConnection,
        _ update: (inout TrackingJob) -> TrackingChange?
    ) async throws -> [TrackingJob] {
        if let initial { try await insert(initial, on: connection) }
        guard var job = try await job(jobId, forUpdate: true, on: connection) else { return [] }
        let before = job
        let change = update(&job)
        guard job != before else { return [] }
        try await connection.query(
            """
            UPDATE tracking_jobs SET courier_id = \(job.courierId), destination_lat = \(job.destination.lat),
                   destination_lng = \(job.destination.lng), destination_label = \(job.destination.label), phase = \(job.phase.rawValue),
                   travel_mode = \(job.travelMode), travel_mode_since = \(job.travelModeSince), state = \(job.state.rawValue),
                   end_reason = \(job.endReason?.rawValue), tracking_started_at = \(job.trackingStartedAt), updated_at = now()
            WHERE job_id = \(jobId)
            """, logger: logger
        )
        if let change, let courierId = job.courierId {
            let now = Date()
            switch change {
            case .started:
                try await outbox.enqueue(
                    TrackingStarted(
                        jobId: jobId, kind: job.kind, customerId: job.customerId, courierId: courierId, startedAt: now),
                    aggregateId: jobId, on: connection, logger: logger
                )
            case .stopped(let reason):
                try await outbox.enqueue(
                    TrackingStopped(
                        jobId: jobId, kind: job.kind, customerId: job.customerId, courierId: courierId, reason: reason,
                        stoppedAt: now),
                    aggregateId: jobId, on: connection, logger: logger
                )
            }
            logger.info("tracking \(change)", metadata: ["job.id": "\(jobId)", "job.kind": "\(job.kind.rawValue)"])
        }
        return [job]
    }
}

extension Destination {
    package init(address: Address) {
        self.init(lat: address.lat, lng: address.lng, label: "\(address.line1), \(address.area)")
    }
}
