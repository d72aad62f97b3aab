/// The jobs an instance tracks (live or stale), by courier: changed at once for changes made here, reloaded from
/// Postgres every tick. A reload never undoes a change made while its query ran (the snapshot may predate it):
/// otherwise a job turned live just then looked untracked until the next tick and its positions were dropped.
/// Pure: no I/O.
package struct TrackedJobs: Sendable {
    private var byCourier: [String: [TrackingJob]] = [:]
    /// The courier each tracked job is listed under, so a change touches that courier's list alone (a scan of every
    /// courier per change held the lock for milliseconds at 5,000 jobs, while every position waited for it).
    private var courierOfJob: [String: String] = [:]
    /// Counts `track` calls; a reload names the generation its query started at.
    package private(set) var generation = 0
    /// Each job's last change made here, with its generation, until a reload that started after it.
    private var changes: [String: (generation: Int, job: TrackingJob)] = [:]

    package init() {}

    /// The tracked jobs of `courierId`.
    package func jobs(of courierId: String) -> [TrackingJob] { byCourier[courierId] ?? [] }

    /// A job changed here: tracked if it shares its courier's location, untracked otherwise.
    package mutating func track(_ job: TrackingJob) {
        generation += 1
        changes[job.jobId] = (generation, job)
        place(job)
    }

    /// The tracked jobs as a query that started at `generation` read them; changes made since then stay.
    package mutating func reload(_ jobs: [TrackingJob], readAt generation: Int) {
        changes = changes.filter { $0.value.generation > generation }
        var byId = Dictionary(jobs.map { ($0.jobId, $0) }, uniquingKeysWith: { _, later in later })
        for change in changes.values { byId[change.job.jobId] = change.job }
        byCourier = [:]
        courierOfJob = [:]
        for job in byId.values { place(job) }
    }

    /// Jobs of one courier as a query that started at `generation` read them (told that another instance changed
    /// one): each is tracked as a change of its own, so a reload that started earlier keeps it, unless a change
    /// made here since that generation says otherwise. Returns the jobs that were not tracked before.
    package mutating func learn(_ jobs: [TrackingJob], readAt generation: Int) -> [TrackingJob] {
        var added: [TrackingJob] = []
        for job in jobs where (changes[job.jobId]?.generation ?? Int.min) <= generation {
            if courierOfJob[job.jobId] == nil { added.append(job) }
            track(job)
        }
        return added
    }

    private mutating func place(_ job: TrackingJob) {
        if let previous = courierOfJob.removeValue(forKey: job.jobId) {
            byCourier[previous]?.removeAll { $0.jobId == job.jobId }
            if byCourier[previous]?.isEmpty == true { byCourier.removeValue(forKey: previous) }
        }
        guard job.state.sharesLocation, let courierId = job.courierId else { return }
        byCourier[courierId, default: []].append(job)
        courierOfJob[job.jobId] = courierId
    }
}
