import Contracts
import Foundation
import Hummingbird
import Kafka
import Logging
import Realtime
import RealtimePlatform
import ServiceKit
import Synchronization

/// The live side of tracking: positions in, `location`, `eta` and `tracking_status` out to each job's room on
/// `/tracking` (every instance, through the realtime adapter). Which jobs are tracked comes from Postgres
/// (refreshed every tick, and at once for changes made here); positions stay in memory.
package final class TrackingHub: Sendable {
    let settings: LocationSettings
    let database: Database
    let engine: TrackingEngine
    let namespace: SocketIONamespace
    let book: PositionBook
    let eta: EtaCoordinator
    let producer: KafkaProducer
    let logger: Logger
    private let tracked = Mutex(TrackedJobs())

    package init(
        settings: LocationSettings, database: Database, engine: TrackingEngine, namespace: SocketIONamespace,
        eta: EtaCoordinator,
        producer: KafkaProducer, logger: Logger
    ) {
        self.settings = settings
        self.database = database
        self.engine = engine
        self.namespace = namespace
        self.book = PositionBook(
            rate: settings.positionRate, burst: settings.positionBurst, publishInterval: settings.publishInterval)
        self.eta = eta
        self.producer = producer
        self.logger = logger
    }

    static func room(_ jobId: String) -> String { "job:\(jobId)" }

    // MARK: Positions in

    /// The answer to a courier's position.
    package struct PositionAck: Codable, Sendable, Equatable, ResponseEncodable {
        package var accepted: Bool
        /// `older_than_last` when a position not newer than the last one was dropped.
        package var reason: String?
    }

    /// A courier's position: kept if newer than the last, sent to the watchers of the courier's tracked jobs,
    /// and (throttled) to couriers.positions.
    package func receive(_ position: CourierPosition, from courier: Identity) async throws -> PositionAck {
        guard courier.role == .rider || courier.role == .technician else {
            throw APIError.forbidden("only riders and technicians send positions")
        }
        let position = try position.validated(now: Date(), settings: settings)
        switch book.record(position, courierId: courier.userId) {
        case .rateLimited:
            throw APIError(
                .tooManyRequests, code: .rateLimited, message: "at most \(settings.positionRate) positions a second")
        case .olderThanLast:
            return PositionAck(accepted: false, reason: "older_than_last")
        case .accepted(let publish):
            if publish { publishPosition(position, courier: courier) }
            await deliver(position, courierId: courier.userId)
            return PositionAck(accepted: true, reason: nil)
        }
    }

    /// A position another instance published: remembered for watchers who join here.
    package func learn(_ update: PositionUpdated) {
        let position = CourierPosition(
            lat: update.lat, lng: update.lng, accuracyMeters: update.accuracyMeters,
            headingDegrees: update.headingDegrees,
            speedMps: update.speedMps, recordedAt: update.recordedAt
        )
        book.learn(position, courierId: update.courierId)
    }

    private func publishPosition(_ position: CourierPosition, courier: Identity) {
        let update = PositionUpdated(
            courierId: courier.userId, role: courier.role, lat: position.lat, lng: position.lng,
            accuracyMeters: position.accuracyMeters,
            headingDegrees: position.headingDegrees, speedMps: position.speedMps, recordedAt: position.recordedAt
        )
        let producer = producer
        let logger = logger
        Task {
            do {
                let value = try ContractCoding.encode(EventEnvelope(aggregateId: courier.userId, payload: update))
                try await producer.send(topic: Topic.couriersPositions.rawValue, key: courier.userId, value: value)
            } catch {
                logger.warning(
                    "could not publish a position", metadata: ["courier.id": "\(courier.userId)", "error": "\(error)"])
            }
        }
    }

    private func deliver(_ position: CourierPosition, courierId: String) async {
        for job in tracked.withLock({ $0.jobs(of: courierId) }) {
            // Live again: `after` sends the status, this location and a fresh ETA. No job back means the database
            // has it live already (this instance's list, reloaded by `tick`, was older): deliver as usual, never
            // drop the position.
            if job.state == .stale,
                let revived = try? await database.transaction({ try await engine.markLive(job.jobId, on: $0) })
            {
                await after([revived])
                continue
            }
            // Only the latest position matters: a watcher that reads slowly gets it instead of a backlog.
            await namespace.emit(
                "location", Self.location(job.jobId, position), toRoom: Self.room(job.jobId), latestKey: job.jobId)
            refreshEta(job, position: position, courierId: courierId)
        }
    }

    private static func location(_ jobId: String, _ position: CourierPosition) -> LocationUpdate {
        LocationUpdate(
            jobId: jobId, lat: position.lat, lng: position.lng, headingDegrees: position.headingDegrees,
            recordedAt: position.recordedAt)
    }

    private func refreshEta(_ job: TrackingJob, position: CourierPosition, courierId: String) {
        guard eta.claim(job.jobId, at: position.point) else { return }
        let speed = book.learnedSpeed(courierId)
        Task {
            let update = await eta.compute(job, from: position.point, learnedSpeedMps: speed)
            await namespace.emit("eta", update, toRoom: Self.room(job.jobId))
        }
    }

    // MARK: Watchers

    /// A customer starts watching a job: only the job's own customer may (BR-001).
    package func watch(_ socket: SocketIOSocket, jobId: String) async throws -> TrackingView {
        guard let identity = socket.identity else { throw APIError.unauthorized("not signed in") }
        let view = try await view(jobId: jobId, for: identity)
        socket.join(Self.room(jobId))
        return view
    }

    /// What the job's customer sees now.
    package func view(jobId: String, for identity: Identity) async throws -> TrackingView {
        let jobId = try Validate.identifier(jobId, "jobId")
        guard let job = try await database.withConnection({ try await engine.job(jobId, on: $0) }) else {
            throw APIError.notFound("no tracked job \(jobId)")
        }
        guard identity.role == .customer, job.customerId == identity.userId else {
            throw APIError.forbidden("only the customer of this job may watch it")
        }
        var view = TrackingView(
            jobId: job.jobId, kind: job.kind, state: job.state, message: job.message, lastUpdatedAt: nil,
            lastLocation: nil,
            destination: job.destination, eta: nil, travelMode: job.travelMode
        )
        if job.state.sharesLocation, let courierId = job.courierId, let latest = book.latest(courierId) {
            view.lastLocation = Self.location(job.jobId, latest.position)
            view.lastUpdatedAt = latest.position.recordedAt
            if job.state == .live {
                view.eta = await eta.latest(
                    job, from: latest.position.point, learnedSpeedMps: book.learnedSpeed(courierId))
            } else {
                view.eta = .unavailable(jobId: job.jobId, text: "ETA recalculating")
            }
        }
        return view
    }

    // MARK: State changes

    /// Tells watchers about jobs whose state changed (after the change committed) and keeps the tracked list.
    package func after(_ jobs: [TrackingJob]) async {
        for job in jobs {
            track(job)
            let latest = job.courierId.flatMap { book.latest($0) }
            let lastUpdatedAt = job.state.sharesLocation ? latest?.position.recordedAt : nil
            await namespace.emit(
                "tracking_status",
                TrackingStatus(jobId: job.jobId, state: job.state, message: job.message, lastUpdatedAt: lastUpdatedAt),
                toRoom: Self.room(job.jobId)
            )
            switch job.state {
            case .live:
                if let latest, let courierId = job.courierId {
                    await namespace.emit(
                        "location", Self.location(job.jobId, latest.position), toRoom: Self.room(job.jobId))
                    refreshEta(job, position: latest.position, courierId: courierId)
                }
            case .stale:
                eta.forget(job.jobId)
                await namespace.emit(
                    "eta", EtaUpdate.unavailable(jobId: job.jobId, text: "ETA recalculating"),
                    toRoom: Self.room(job.jobId))
            default:
                eta.forget(job.jobId)
            }
        }
    }

    private func track(_ job: TrackingJob) { tracked.withLock { $0.track(job) } }

    /// One round of the hub's housekeeping: reloads the tracked jobs, marks silent ones stale, ends those past
    /// the time limit.
    package func tick() async throws {
        let readAt = tracked.withLock { $0.generation }
        let jobs = try await database.withConnection { try await engine.trackedJobs(on: $0) }
        tracked.withLock { $0.reload(jobs, readAt: readAt) }
        let now = Date()
        let staleAfter = settings.staleAfter.timeInterval
        for job in jobs where job.state == .live {
            let heard = job.courierId.flatMap { book.latest($0)?.receivedAt } ?? job.trackingStartedAt ?? now
            let since = max(heard, job.trackingStartedAt ?? heard)
            guard now.timeIntervalSince(since) > staleAfter else { continue }
            if let stale = try await database.transaction({ try await engine.markStale(job.jobId, on: $0) }) {
                await after([stale])
            }
        }
        let ended = try await database.transaction { try await engine.endOverdue(on: $0) }
        await after(ended)
        book.forget(before: now.addingTimeInterval(-3600))
    }
}

/// Each tracked job's last ETA, when it is due again (every `etaRefresh`, or after a significant move), and the
/// provider behind a circuit breaker. When the provider fails the answer is "ETA unavailable".
package final class EtaCoordinator: Sendable {
    private struct JobEta {
        var update: EtaUpdate?
        var computedAt: Date?
        var from: GeoPoint?
        var inFlight = false
    }

    private let jobs = Mutex<[String: JobEta]>([:])
    let provider: any EtaProvider
    let breaker: CircuitBreaker
    let refresh: TimeInterval
    let significantMoveMeters: Double
    let logger: Logger

    package init(provider: any EtaProvider, settings: LocationSettings, logger: Logger) {
        self.provider = provider
        self.breaker = CircuitBreaker(failureThreshold: settings.breakerFailures, openFor: settings.breakerOpen)
        self.refresh = settings.etaRefresh.timeInterval
        self.significantMoveMeters = settings.etaSignificantMoveMeters
        self.logger = logger
    }

    /// Whether the job's ETA is due from `point` (none yet, old, or the courier moved far); if so the caller
    /// computes it and nobody else does meanwhile.
    func claim(_ jobId: String, at point: GeoPoint, now: Date = Date()) -> Bool {
        jobs.withLock { jobs in
            var entry = jobs[jobId] ?? JobEta()
            guard !entry.inFlight else { return false }
            let due =
                entry.computedAt.map { now.timeIntervalSince($0) >= refresh } ?? true
                || (entry.from.map { $0.meters(to: point) >= significantMoveMeters } ?? true)
            guard due else { return false }
            entry.inFlight = true
            jobs[jobId] = entry
            return true
        }
    }

    /// Computes the job's ETA from `from` (after ``claim(_:at:now:)``) and remembers it.
    func compute(_ job: TrackingJob, from: GeoPoint, learnedSpeedMps: Double?) async -> EtaUpdate {
        let now = Date()
        let update: EtaUpdate
        do {
            let estimate = try await breaker.run {
                try await provider.estimate(from: from, to: job.destination.point, learnedSpeedMps: learnedSpeedMps)
            }
            update = .available(jobId: job.jobId, kind: job.kind, estimate: estimate, now: now)
        } catch {
            logger.warning("no ETA from the provider", metadata: ["job.id": "\(job.jobId)", "error": "\(error)"])
            update = .unavailable(jobId: job.jobId)
        }
        jobs.withLock { jobs in
            // Forgotten meanwhile (tracking ended): stay forgotten.
            guard jobs[job.jobId] != nil else { return }
            jobs[job.jobId] = JobEta(update: update, computedAt: now, from: from, inFlight: false)
        }
        return update
    }

    /// The last ETA, or a fresh one if none is known here (a watcher joining this instance).
    func latest(_ job: TrackingJob, from: GeoPoint, learnedSpeedMps: Double?) async -> EtaUpdate {
        if let known = jobs.withLock({ $0[job.jobId]?.update }) { return known }
        guard claim(job.jobId, at: from) else {
            return jobs.withLock { $0[job.jobId]?.update } ?? .unavailable(jobId: job.jobId)
        }
        return await compute(job, from: from, learnedSpeedMps: learnedSpeedMps)
    }

    func forget(_ jobId: String) { _ = jobs.withLock { $0.removeValue(forKey: jobId) } }
}
