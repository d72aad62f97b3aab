import Contracts
import Foundation
import Hummingbird
import Kafka
import Logging
import PostgresNIO
import Realtime
import RealtimePlatform
import ServiceKit
import Synchronization

/// The live side of tracking: positions in, `location`, `eta` and `tracking_status` out to each job's room on
/// `/tracking` (every instance, through the realtime store: `tracking_status` in the transaction of the job's
/// change, `location` and `eta` as the room's latest values). Which jobs are tracked comes from Postgres
/// (refreshed every tick, and at once for changes made here); positions stay in memory.
package final class TrackingHub: Sendable {
    let settings: LocationSettings
    let database: Database
    let workflow: TrackingWorkflow
    let namespace: SocketIONamespace
    /// `tracking_status`, written with the job's change.
    let emits: RealtimeEmitter
    let book: PositionBook
    let eta: EtaCoordinator
    /// Positions for couriers.positions (other instances, allocation): the latest per courier, in batches.
    let positions: LatestPerKeyPublisher
    /// ETA computations, which a position's answer does not wait for.
    let background: BackgroundTasks
    let now: Now
    let logger: Logger
    private let tracked = Mutex(TrackedJobs())

    package init(
        settings: LocationSettings, database: Database, workflow: TrackingWorkflow, namespace: SocketIONamespace,
        emits: RealtimeEmitter, eta: EtaCoordinator, positions: LatestPerKeyPublisher, background: BackgroundTasks,
        now: Now, logger: Logger
    ) {
        self.settings = settings
        self.database = database
        self.workflow = workflow
        self.namespace = namespace
        self.emits = emits
        self.book = PositionBook(settings: settings)
        self.eta = eta
        self.positions = positions
        self.background = background
        self.now = now
        self.logger = logger
    }

    static func room(_ jobId: String) -> String { roomPrefix + jobId }
    static let roomPrefix = "job:"

    /// A socket being recovered keeps the job rooms its user may still watch (BR-001), and no others.
    package func recoveredRooms(user: any SocketIOUser, rooms: Set<String>) async -> Set<String> {
        guard let identity = user as? Identity else { return [] }
        var allowed = Set<String>()
        for room in rooms where room.hasPrefix(Self.roomPrefix) {
            if (try? await view(jobId: String(room.dropFirst(Self.roomPrefix.count)), for: identity)) != nil {
                allowed.insert(room)
            }
        }
        return allowed
    }

    // MARK: Positions in

    /// The answer to a courier's position.
    package struct PositionAck: Codable, Sendable, Equatable, ResponseEncodable {
        package var accepted: Bool
        /// Why a valid position was dropped: `older_than_last`, `inaccurate` or `implausible_jump`.
        package var reason: String?
    }

    /// A courier's position: kept if newer than the last, sent to the watchers of the courier's tracked jobs,
    /// and (throttled) to couriers.positions. Each spends a rate-limit token.
    package func receive(_ position: CourierPosition, from courier: Identity) async throws -> PositionAck {
        try Self.requireCourier(courier)
        let now = self.now()
        try TrackingRules.validate(position, now: now, settings: settings)
        try admit(courier)
        switch book.record(position, courierId: courier.userId, now: now) {
        case .dropped(let outcome):
            return PositionAck(accepted: false, reason: outcome.rawValue)
        case .accepted(let publish):
            if publish { publishPosition(position, courier: courier) }
            await deliver(position, courierId: courier.userId)
            return PositionAck(accepted: true, reason: nil)
        }
    }

    /// Positions an app queued while offline, for one rate-limit token. Each is answered in the order sent:
    /// applied, older than the courier's last (a retried batch changes nothing), too old to matter, too coarse or
    /// a GPS jump. Any other invalid position refuses the batch before anything is applied. Watchers and
    /// couriers.positions get the newest applied one only.
    package func receive(batch positions: [CourierPosition], from courier: Identity) async throws -> [PositionOutcome] {
        try Self.requireCourier(courier)
        let now = self.now()
        var answers: [PositionOutcome?] = []
        for position in positions {
            if TrackingRules.isTooOld(position, now: now, settings: settings) {
                answers.append(.tooOld)
            } else {
                try TrackingRules.validate(position, now: now, settings: settings)
                answers.append(nil)
            }
        }
        try admit(courier)
        var newest: (position: CourierPosition, publish: Bool)?
        // Oldest first, so each is newer than the one before.
        for index in positions.indices.sorted(by: { positions[$0].recordedAt < positions[$1].recordedAt })
        where answers[index] == nil {
            switch book.record(positions[index], courierId: courier.userId, now: now) {
            case .dropped(let outcome):
                answers[index] = outcome
            case .accepted(let publish):
                answers[index] = .applied
                newest = (positions[index], publish || newest?.publish == true)
            }
        }
        if let newest {
            if newest.publish { publishPosition(newest.position, courier: courier) }
            await deliver(newest.position, courierId: courier.userId)
        }
        return answers.map { $0 ?? .olderThanLast }
    }

    /// Only riders and technicians send positions.
    private static func requireCourier(_ identity: Identity) throws(LocationRuleViolation) {
        guard identity.role == .rider || identity.role == .technician else { throw .notCourier }
    }

    /// Spends one of the courier's rate-limit tokens (a position, or a whole batch).
    private func admit(_ courier: Identity) throws(LocationRuleViolation) {
        guard book.admit(courier.userId) else { throw .positionRateLimited(perSecond: settings.positionRate) }
    }

    /// A position another instance published: remembered for watchers who join here.
    package func learn(_ update: PositionUpdated) {
        let position = CourierPosition(
            lat: update.lat, lng: update.lng, accuracyMeters: update.accuracyMeters,
            headingDegrees: update.headingDegrees,
            speedMps: update.speedMps, recordedAt: update.recordedAt
        )
        book.learn(position, courierId: update.courierId, now: now())
    }

    private func publishPosition(_ position: CourierPosition, courier: Identity) {
        let update = PositionUpdated(
            courierId: courier.userId, role: courier.role, lat: position.lat, lng: position.lng,
            accuracyMeters: position.accuracyMeters,
            headingDegrees: position.headingDegrees, speedMps: position.speedMps, recordedAt: position.recordedAt
        )
        do {
            let value = try ContractCoding.encode(
                EventEnvelope(aggregateId: courier.userId, occurredAt: now(), payload: update))
            positions.publish(key: courier.userId, value: value)
        } catch {
            logger.warning(
                "could not encode a position", metadata: ["courier.id": "\(courier.userId)", "error": "\(error)"])
        }
    }

    private func deliver(_ position: CourierPosition, courierId: String) async {
        for job in tracked.withLock({ $0.jobs(of: courierId) }) {
            // Live again: `after` sends the status, this location and a fresh ETA. No job back means the database
            // has it live already (this instance's list, reloaded by `tick`, was older): deliver as usual, never
            // drop the position.
            if job.state == .stale,
                let revived = try? await database.transaction({ connection in
                    try await announce(try await workflow.markLive(job.jobId, on: connection), on: connection)
                }) ?? nil
            {
                await after([revived])
                continue
            }
            // Only the latest position matters: a watcher that reads slowly gets it instead of a backlog.
            emitLatest("location", Self.location(job.jobId, position), job: job.jobId)
            refreshEta(job, position: position, courierId: courierId)
        }
    }

    private static func location(_ jobId: String, _ position: CourierPosition) -> LocationUpdate {
        LocationUpdate(
            jobId: jobId, lat: position.lat, lng: position.lng, headingDegrees: position.headingDegrees,
            recordedAt: position.recordedAt)
    }

    /// Recomputes the job's ETA from `position` if one is due; `withLocation` sends the position along with it.
    private func refreshEta(
        _ job: TrackingJob, position: CourierPosition, courierId: String, withLocation: Bool = false
    ) {
        guard eta.claim(job.jobId, at: position.point) else { return }
        if withLocation { emitLatest("location", Self.location(job.jobId, position), job: job.jobId) }
        let speed = book.learnedSpeed(courierId)
        let queued = background.submit { [eta] in
            let update = await eta.compute(job, from: position.point, learnedSpeedMps: speed)
            self.emitLatest("eta", update, job: job.jobId)
        }
        // Dropped (the queue is full or stopping): the next position claims it again.
        if !queued { eta.release(job.jobId) }
    }

    /// A live job's ETA is recomputed when it is due even if no position arrived since (the courier stands
    /// still), by the instance the courier sends their positions to, so one instance asks the provider (two, for
    /// the few seconds until another instance that took a queued batch learns a newer position). The location
    /// goes with it: the instance that made the job live may not have had the position, and this one may have
    /// taken it before its tick learned the job was live, so neither sent it (a technician standing still sends no
    /// other; found with two instances behind the compose gateway).
    private func refreshDueEtas(_ jobs: [TrackingJob]) {
        for job in jobs where job.state == .live {
            guard let courierId = job.courierId, let latest = book.latest(courierId), latest.fromCourier else {
                continue
            }
            refreshEta(job, position: latest.position, courierId: courierId, withLocation: true)
        }
    }

    /// A job of courier `courierId` changed, maybe on another instance (``TrackedJobsFollower``): tracks the
    /// courier's jobs here at once rather than at the next tick, and sends a live job it did not track its
    /// courier's latest position if that came to this instance (which had no job to send it to).
    package func learnJobs(ofCourier courierId: String) async throws {
        let readAt = tracked.withLock { $0.generation }
        let jobs = try await database.withConnection { try await workflow.trackedJobs(ofCourier: courierId, on: $0) }
        let added = tracked.withLock { $0.learn(jobs, readAt: readAt) }
        guard let latest = book.latest(courierId), latest.fromCourier else { return }
        for job in added where job.state == .live {
            emitLatest("location", Self.location(job.jobId, latest.position), job: job.jobId)
            refreshEta(job, position: latest.position, courierId: courierId)
        }
    }

    // MARK: Watchers

    /// A customer starts watching a job: only the job's own customer may (BR-001). The socket is in the job's room
    /// before the view is read, so a change meanwhile is in the view or delivered (perhaps both), never neither.
    package func watch(_ socket: SocketIOSocket, jobId: String) async throws -> TrackingView {
        guard let identity = socket.identity else { throw APIError.unauthorized("not signed in") }
        _ = try await view(jobId: jobId, for: identity)
        let room = Self.room(jobId)
        socket.join(room)
        do {
            return try await view(jobId: jobId, for: identity)
        } catch {
            socket.leave(room)
            throw error
        }
    }

    /// What the job's customer sees now.
    package func view(jobId: String, for identity: Identity) async throws -> TrackingView {
        let jobId = try Validate.identifier(jobId, "jobId")
        let job = try TrackingRules.requireWatcher(
            try await database.withConnection({ try await workflow.job(jobId, on: $0) }), jobId: jobId,
            customer: identity)
        var view = TrackingView(
            jobId: job.jobId, kind: job.kind, state: job.state, message: job.message, lastUpdatedAt: nil,
            lastLocation: nil,
            destination: job.destination, eta: nil, travelMode: job.travelMode, version: job.version
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

    /// A job's latest `location` or `eta` for its watchers (the room's latest value of that key: a watcher that
    /// reads slowly or recovers gets the newest, not a backlog). One that cannot be written is dropped: the next
    /// position or ETA brings a newer one.
    private func emitLatest(_ event: String, _ payload: some Encodable & Sendable, job jobId: String) {
        let namespace = self.namespace
        let logger = self.logger
        let queued = background.submit {
            do {
                try await namespace.emit(event, payload, toRoom: Self.room(jobId), latestKey: event)
            } catch {
                logger.warning("could not emit \(event)", metadata: ["job.id": "\(jobId)", "error": "\(error)"])
            }
        }
        if !queued {
            logger.debug("dropped a \(event) emit: the background queue is full", metadata: ["job.id": "\(jobId)"])
        }
    }

    // MARK: State changes

    /// Writes a changed job's `tracking_status` in the transaction of its change (none: nothing changed); returns
    /// the job.
    package func announce(_ job: TrackingJob?, on connection: PostgresConnection) async throws -> TrackingJob? {
        guard let job else { return nil }
        return try await announce([job], on: connection).first
    }

    /// Writes each changed job's `tracking_status` in the transaction of its change; returns the jobs. A job that
    /// stops sharing its courier's location (ended, not started) has its room's `location` and `eta` closed in that
    /// transaction: its watchers get the status at the commit, and no `location` may follow it, not even from an
    /// instance whose list of tracked jobs is a tick old. It also stops getting positions here at once, before the
    /// commit. (Were the change rolled back, the next tick's reload tracks the job again.) Jobs go in room order,
    /// the order the store's batches lock latest values in.
    package func announce(_ jobs: [TrackingJob], on connection: PostgresConnection) async throws -> [TrackingJob] {
        for job in jobs.sorted(by: { Self.room($0.jobId) < Self.room($1.jobId) }) {
            let room = Self.room(job.jobId)
            if job.state.sharesLocation {
                try await emits.reopenLatest(inRoom: room, on: connection)
            } else {
                try await emits.closeLatest(Self.latestKeys, inRoom: room, on: connection)
                track(job)
            }
            let latest = job.courierId.flatMap { book.latest($0) }
            let lastUpdatedAt = job.state.sharesLocation ? latest?.position.recordedAt : nil
            try await emits.emit(
                "tracking_status", TrackingStatus(job, lastUpdatedAt: lastUpdatedAt), toRoom: room, on: connection)
        }
        return jobs
    }

    /// The events a job's room gets as latest values, only while the job shares its courier's location.
    static let latestKeys = ["location", "eta"]

    /// A job's change of state was announced and committed: keeps the tracked list, and refreshes the job's
    /// location and ETA for its watchers.
    package func after(_ jobs: [TrackingJob]) async {
        for job in jobs {
            track(job)
            let latest = job.courierId.flatMap { book.latest($0) }
            switch job.state {
            case .live:
                if let latest, let courierId = job.courierId {
                    emitLatest("location", Self.location(job.jobId, latest.position), job: job.jobId)
                    refreshEta(job, position: latest.position, courierId: courierId)
                }
            case .stale:
                eta.forget(job.jobId)
                emitLatest("eta", EtaUpdate.unavailable(jobId: job.jobId, text: "ETA recalculating"), job: job.jobId)
            default:
                eta.forget(job.jobId)
            }
        }
    }

    private func track(_ job: TrackingJob) { tracked.withLock { $0.track(job) } }

    /// One round of the hub's housekeeping: reloads the tracked jobs, marks silent ones stale, refreshes ETAs
    /// that are `ETA_REFRESH_SECONDS` old, ends those past the time limit. Returns when the next is due while jobs
    /// are tracked, nil while none is.
    @discardableResult
    package func tick() async throws -> Duration? {
        let readAt = tracked.withLock { $0.generation }
        let jobs = try await database.withConnection { try await workflow.trackedJobs(on: $0) }
        tracked.withLock { $0.reload(jobs, readAt: readAt) }
        let now = self.now()
        var heardFrom: [TrackingJob] = []
        for job in jobs {
            let heard = job.courierId.flatMap { book.latest($0)?.receivedAt }
            guard TrackingRules.isSilent(job, lastHeard: heard, now: now, staleAfter: settings.staleAfter) else {
                heardFrom.append(job)
                continue
            }
            if let stale = try await database.transaction({ connection in
                try await announce(try await workflow.markStale(job.jobId, on: connection), on: connection)
            }) {
                await after([stale])
            }
        }
        refreshDueEtas(heardFrom)
        let ended = try await database.transaction { connection in
            try await announce(try await workflow.endOverdue(on: connection), on: connection)
        }
        await after(ended)
        book.forget(before: now - .seconds(3600))
        return jobs.isEmpty ? nil : settings.tick
    }
}
