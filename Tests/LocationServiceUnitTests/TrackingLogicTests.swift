import Contracts
import Foundation
import LocationService
import ServiceKit
import Testing

@Suite("Tracking rules, ETA text, position book, circuit breaker")
struct TrackingLogicTests {
    static func job(_ kind: JobKind) -> TrackingJob {
        TrackingJob(
            jobId: "job-1", kind: kind, customerId: "customer-1", courierId: "courier-1",
            destination: Destination(lat: 12.9, lng: 77.6, label: "4 Lake View, Koramangala")
        )
    }

    @Test("a reload whose query started before a job turned live here keeps it tracked; a later reload decides")
    func trackedJobsKeepChangesMadeDuringAReload() {
        var tracked = TrackedJobs()
        var waiting = Self.job(.serviceRequest)
        waiting.state = .waitingForTravelMode
        var live = waiting
        live.state = .live

        let readAt = tracked.generation
        tracked.track(live)
        tracked.reload([waiting], readAt: readAt)
        #expect(tracked.jobs(of: "courier-1") == [live], "the older snapshot undid the change made during its query")

        tracked.reload([live], readAt: tracked.generation)
        #expect(tracked.jobs(of: "courier-1") == [live])
        var ended = live
        ended.state = .ended
        tracked.reload([], readAt: tracked.generation)
        #expect(tracked.jobs(of: "courier-1").isEmpty, "a reload after the change no longer keeps it")
        tracked.track(live)
        tracked.track(ended)
        #expect(tracked.jobs(of: "courier-1").isEmpty)
    }

    @Test("a job learned from a notice is new once, outlives an older reload, and yields to a newer change here")
    func trackedJobsLearnAnotherInstancesJob() {
        var tracked = TrackedJobs()
        var live = Self.job(.delivery)
        live.state = .live

        let reloadStarted = tracked.generation
        #expect(tracked.learn([live], readAt: tracked.generation) == [live], "a job not tracked before is new")
        #expect(tracked.learn([live], readAt: tracked.generation).isEmpty, "told again: nothing new")
        tracked.reload([], readAt: reloadStarted)
        #expect(tracked.jobs(of: "courier-1") == [live], "a reload whose query started earlier dropped it")

        var ended = live
        ended.state = .ended
        let readAt = tracked.generation
        tracked.track(ended)
        #expect(tracked.learn([live], readAt: readAt).isEmpty)
        #expect(tracked.jobs(of: "courier-1").isEmpty, "a read older than the job's end here tracked it again")
    }

    @Test("a tracked job moves with its courier and leaves when it stops sharing the location, among 5,000 others")
    func trackedJobsFollowTheirCourier() {
        var tracked = TrackedJobs()
        var others: [TrackingJob] = []
        for index in 0..<5_000 {
            var job = Self.job(.delivery)
            job.jobId = "other-\(index)"
            job.courierId = "courier-\(index % 2_500)"
            job.state = .live
            others.append(job)
        }
        tracked.reload(others, readAt: tracked.generation)
        #expect(tracked.jobs(of: "courier-7").map(\.jobId).sorted() == ["other-2507", "other-7"])

        var job = Self.job(.delivery)
        job.state = .live
        tracked.track(job)
        #expect(tracked.jobs(of: "courier-1").map(\.jobId).sorted() == ["job-1", "other-1", "other-2501"])
        job.courierId = "courier-new"
        tracked.track(job)
        #expect(tracked.jobs(of: "courier-new") == [job])
        #expect(!tracked.jobs(of: "courier-1").contains { $0.jobId == "job-1" }, "still listed under the old courier")
        job.state = .ended
        tracked.track(job)
        #expect(tracked.jobs(of: "courier-new").isEmpty)
        #expect(tracked.jobs(of: "courier-1").count == 2)
    }

    @Test("a delivery is live while travelling and stops with the reason it finished")
    func delivery() {
        var job = Self.job(.delivery)
        let now = Date()
        #expect(job.settle(now: now) == nil)
        #expect(job.state == .notStarted)
        job.phase = .travelling
        #expect(job.settle(now: now) == .started)
        #expect(job.state == .live)
        #expect(job.trackingStartedAt == now)
        job.state = .stale
        #expect(job.settle(now: now) == nil, "still tracked: no second TrackingStarted")
        job.phase = .finished
        #expect(job.settle(now: now, reason: .delivered) == .stopped(.delivered))
        #expect(job.state == .ended)
        #expect(job.message == "Your order has been delivered.")
    }

    @Test("a service request needs OnTheWay and travel mode; travel mode off ends it; arriving ends it")
    func serviceRequest() {
        var job = Self.job(.serviceRequest)
        let now = Date()
        job.travelMode = true
        #expect(job.settle(now: now) == nil, "travel mode before OnTheWay tracks nothing yet")
        #expect(job.state == .notStarted)
        job.travelMode = false
        job.phase = .travelling
        #expect(job.settle(now: now) == nil)
        #expect(job.state == .waitingForTravelMode)
        #expect(
            job.message == "Technician is on the way. Live location will be available once the technician enables it.")
        job.travelMode = true
        #expect(job.settle(now: now) == .started)
        job.travelMode = false
        #expect(job.settle(now: now, reason: .travelModeOff) == .stopped(.travelModeOff))
        #expect(job.state == .ended)
        job.travelMode = true
        #expect(job.settle(now: now) == .started)
        #expect(job.endReason == nil)
        job.phase = .finished
        #expect(job.settle(now: now, reason: .arrived) == .stopped(.arrived))
        #expect(job.message == "The technician has arrived.")
    }

    @Test("ETA sentences, in minutes rounded up and kilometres or metres")
    func etaText() {
        let now = Date(timeIntervalSince1970: 1_000)
        let far = EtaUpdate.available(
            jobId: "j", kind: .serviceRequest, estimate: RouteEstimate(seconds: 690, meters: 2_512), now: now)
        #expect(far.text == "Arriving in 12 minutes")
        #expect(far.spokenText == "Technician is currently 2.5 km away and is expected to arrive in 12 minutes.")
        #expect(far.arrivalAt == now.addingTimeInterval(690))
        let near = EtaUpdate.available(
            jobId: "j", kind: .delivery, estimate: RouteEstimate(seconds: 20, meters: 184), now: now)
        #expect(near.text == "Arriving in 1 minute")
        #expect(near.spokenText == "Your rider is currently 180 m away and is expected to arrive in 1 minute.")
        #expect(EtaUpdate.unavailable(jobId: "j").available == false)
    }

    @Test("the estimator: road factor over the learned speed, kept in a city's range")
    func estimator() async throws {
        let provider = EstimatingEtaProvider(roadFactor: 1.3, defaultSpeedMps: 6)
        let from = GeoPoint(lat: 12.90, lng: 77.60)
        let to = GeoPoint(lat: 12.92, lng: 77.60)
        let straight = from.meters(to: to)
        let learned = try await provider.estimate(from: from, to: to, learnedSpeedMps: 10)
        #expect(abs(learned.meters - straight * 1.3) < 0.001)
        #expect(abs(learned.seconds - straight * 1.3 / 10) < 0.001)
        let stuck = try await provider.estimate(from: from, to: to, learnedSpeedMps: 0.1)
        #expect(abs(stuck.seconds - straight * 1.3 / 2) < 0.001)
        let unknown = try await provider.estimate(from: from, to: to, learnedSpeedMps: nil)
        #expect(abs(unknown.seconds - straight * 1.3 / 6) < 0.001)
    }

    @Test(
        "the position book drops older, coarse and jumping positions, limits the rate and throttles publication")
    func positionBook() throws {
        let settings = try LocationSettings(
            environment: ServiceEnvironment([
                "POSITION_RATE_PER_SECOND": "1", "POSITION_RATE_BURST": "3", "POSITION_PUBLISH_INTERVAL_SECONDS": "3",
            ]))
        let book = PositionBook(settings: settings)
        let now = Date()
        func position(_ offset: TimeInterval, north meters: Double = 0, accuracy: Double = 5) -> CourierPosition {
            CourierPosition(
                lat: 12.9 + meters / 111_195, lng: 77.6, accuracyMeters: accuracy, headingDegrees: nil, speedMps: nil,
                recordedAt: now.addingTimeInterval(offset))
        }
        #expect(book.admit("c") && book.admit("c") && book.admit("c"))
        #expect(!book.admit("c"), "the burst of 3 is spent")
        #expect(book.record(position(0), courierId: "c", now: now) == .accepted(publish: true))
        #expect(book.record(position(1), courierId: "c", now: now.addingTimeInterval(1)) == .accepted(publish: false))
        #expect(book.record(position(-5), courierId: "c", now: now.addingTimeInterval(1)) == .dropped(.olderThanLast))
        #expect(
            book.record(position(2, accuracy: 101), courierId: "c", now: now.addingTimeInterval(2))
                == .dropped(.inaccurate))
        // 70 m/s at most: 700 m in 10 s is possible, 2 km is a GPS jump.
        #expect(
            book.record(position(11, north: 2_000), courierId: "c", now: now.addingTimeInterval(11))
                == .dropped(.implausibleJump))
        #expect(book.latest("c")?.position == position(1))
        #expect(
            book.record(position(11, north: 690), courierId: "c", now: now.addingTimeInterval(11))
                == .accepted(publish: true))
        #expect(book.latest("c")?.position == position(11, north: 690))
        book.learn(position(0.5), courierId: "c", now: now)
        #expect(
            book.latest("c")?.position == position(11, north: 690), "an older position from another instance is ignored"
        )
    }

    @Test("the circuit breaker opens after the threshold and lets one trial through after the pause")
    func circuitBreaker() async throws {
        struct Failure: Error {}
        let breaker = CircuitBreaker(failureThreshold: 2, openFor: .milliseconds(200))
        let start = ContinuousClock.now
        for _ in 0..<2 {
            await #expect(throws: Failure.self) {
                try await breaker.run(now: start) { () async throws -> Int in throw Failure() }
            }
        }
        #expect(breaker.isOpen(at: start + .milliseconds(199)))
        await #expect(throws: CircuitBreaker.Open.self) { try await breaker.run(now: start + .milliseconds(199)) { 1 } }
        let later = start + .milliseconds(200)
        #expect(!breaker.isOpen(at: later))
        #expect(try await breaker.run(now: later) { 7 } == 7)
        #expect(!breaker.isOpen(at: later))
    }
}
