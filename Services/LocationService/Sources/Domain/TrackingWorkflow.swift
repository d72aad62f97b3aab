import Contracts
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// Tracked jobs' transactions: their lifecycle from orders.events, the technician's travel mode, staleness and
/// the time limit, read and written through ``TrackingStore`` and decided by ``TrackingRules``. Every method runs
/// in the caller's transaction and returns the jobs whose state changed, for the watchers to be told once it
/// commits.
package struct TrackingWorkflow: Sendable {
    let settings: LocationSettings
    let store: TrackingStore
    let outbox: Outbox
    let now: Now
    let logger: Logger
    /// The NOTIFY channel on which a change to a job that shares its courier's location names the instance that
    /// made it and the courier, at the commit, one per schema (``TrackedJobsFollower``).
    package let jobsChannel: String
    /// This instance's id, in those notices.
    package let instanceId: String

    package init(
        settings: LocationSettings, schema: String, instanceId: String, outbox: Outbox, now: Now, logger: Logger
    ) {
        self.settings = settings
        self.jobsChannel = "\(schema)_tracked_jobs"
        self.instanceId = instanceId
        self.store = TrackingStore(logger: logger)
        self.outbox = outbox
        self.now = now
        self.logger = logger
    }

    // MARK: orders.events

    /// Applies an orders.events event to its job.
    package func apply(orderEvent event: DecodedEvent, on connection: PostgresConnection) async throws -> [TrackingJob]
    {
        try await step(forOrderEvent: event)?(connection) ?? []
    }

    /// What an orders.events event does to its job, to run in the consumer's transaction; nil for those tracking
    /// does not follow (such as an order accepted, ready or assigned), which the consumer skips without a
    /// transaction.
    package func step(forOrderEvent event: DecodedEvent) -> EventConsumer.Step<[TrackingJob]>? {
        switch event.payload {
        case let created as OrderCreated:
            return { connection in
                try await self.store.insert(
                    TrackingJob(
                        jobId: created.orderId, kind: .delivery, customerId: created.customerId, courierId: nil,
                        destination: Destination(address: created.deliveryAddress)
                    ), on: connection
                )
                return []
            }
        case let pickedUp as OrderPickedUp:
            return { connection in
                let now = self.now()
                let initial = TrackingJob(
                    jobId: pickedUp.orderId, kind: .delivery, customerId: pickedUp.customerId,
                    courierId: pickedUp.rider.id, destination: Destination(address: pickedUp.destination)
                )
                return try await self.change(pickedUp.orderId, creating: initial, on: connection) { job in
                    job.courierId = pickedUp.rider.id
                    job.destination = Destination(address: pickedUp.destination)
                    job.phase = .travelling
                    return job.settle(now: now)
                }
            }
        case let delivered as OrderDelivered:
            return { try await self.finish(delivered.orderId, reason: .delivered, now: self.now(), on: $0) }
        case let cancelled as OrderCancelled:
            return { try await self.finish(cancelled.orderId, reason: .cancelled, now: self.now(), on: $0) }
        case let created as ServiceRequestCreated:
            return { connection in
                try await self.store.insert(
                    TrackingJob(
                        jobId: created.requestId, kind: .serviceRequest, customerId: created.customerId,
                        courierId: nil, destination: Destination(address: created.serviceAddress)
                    ), on: connection
                )
                return []
            }
        case let assigned as ServiceRequestAssigned:
            return { connection in
                let initial = TrackingJob(
                    jobId: assigned.requestId, kind: .serviceRequest, customerId: assigned.customerId,
                    courierId: assigned.technician.id,
                    destination: Destination(address: assigned.serviceAddress)
                )
                return try await self.change(assigned.requestId, creating: initial, on: connection) { job in
                    job.courierId = assigned.technician.id
                    return nil
                }
            }
        case let changed as ServiceRequestStatusChanged:
            return { try await self.apply(changed, now: self.now(), on: $0) }
        default:
            return nil
        }
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
        let current = try TrackingRules.requireTravelModeSwitch(
            try await store.job(jobId, forUpdate: true, on: connection), jobId: jobId, by: technicianId)
        let now = self.now()
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
        let now = self.now()
        let overdue = try await store.overdueJobIds(
            since: now - settings.maximumTracking, limit: limit, on: connection)
        var ended: [TrackingJob] = []
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
                    TrackingRules.travelModeOffPush(
                        job, technicianId: technician, maximumTracking: settings.maximumTracking, now: now),
                    aggregateId: technician, on: connection, logger: logger
                )
            }
            ended += changed
        }
        return ended
    }

    // MARK: Reads

    /// The job `jobId`, if Location knows it.
    package func job(_ jobId: String, on connection: PostgresConnection) async throws -> TrackingJob? {
        try await store.job(jobId, on: connection)
    }

    /// Every job being tracked now (live or stale).
    package func trackedJobs(on connection: PostgresConnection) async throws -> [TrackingJob] {
        try await store.trackedJobs(on: connection)
    }

    /// The jobs of courier `courierId` being tracked now (live or stale).
    package func trackedJobs(ofCourier courierId: String, on connection: PostgresConnection) async throws
        -> [TrackingJob]
    {
        try await store.trackedJobs(ofCourier: courierId, on: connection)
    }

    /// Locks the job (created as `initial` if missing and given), applies `update`, saves it, and announces a
    /// tracking change. Returns the job if anything about it changed.
    private func change(
        _ jobId: String, creating initial: TrackingJob? = nil, on connection: PostgresConnection,
        _ update: (inout TrackingJob) -> TrackingChange?
    ) async throws -> [TrackingJob] {
        if let initial { try await store.insert(initial, on: connection) }
        guard var job = try await store.job(jobId, forUpdate: true, on: connection) else { return [] }
        let before = job
        let change = update(&job)
        guard job != before else { return [] }
        job.version += 1
        try await store.save(job, on: connection)
        if job.state.sharesLocation, let courierId = job.courierId {
            try await store.notifyJobChanged(
                courierId: courierId, instanceId: instanceId, channel: jobsChannel, on: connection)
        }
        if let change, let courierId = job.courierId {
            let now = self.now()
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
