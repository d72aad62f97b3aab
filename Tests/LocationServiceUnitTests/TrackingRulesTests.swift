import Contracts
import Foundation
import LocationService
import ServiceKit
import Testing

@Suite("Location's rules: positions, staleness, who may do what (no database, no sleeping)")
struct TrackingRulesTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)
    static let settings = try! LocationSettings(environment: ServiceEnvironment([:]))

    static func position(recordedAt: Date = now, accuracy: Double = 8, lat: Double = 12.93) -> CourierPosition {
        CourierPosition(
            lat: lat, lng: 77.62, accuracyMeters: accuracy, headingDegrees: 90, speedMps: 6, recordedAt: recordedAt)
    }

    static func job(_ kind: JobKind, state: TrackingState = .live) -> TrackingJob {
        var job = TrackingJob(
            jobId: "job-1", kind: kind, customerId: "customer-1", courierId: "courier-1",
            destination: Destination(lat: 12.9, lng: 77.6, label: "4 Lake View, Koramangala"))
        job.state = state
        return job
    }

    @Test("a position is refused out of range, too old or ahead of the clock, naming the field")
    func positionValidation() throws {
        try TrackingRules.validate(Self.position(), now: Self.now, settings: Self.settings)
        try TrackingRules.validate(
            Self.position(recordedAt: Self.now - .seconds(600)), now: Self.now, settings: Self.settings)
        let refused: [(CourierPosition, String)] = [
            (Self.position(lat: 91), "'position.lat' must be from -90 to 90"),
            (Self.position(accuracy: -1), "'accuracyMeters' must be from 0 to 10000"),
            (Self.position(recordedAt: Self.now + .seconds(31)), "'recordedAt' is in the future"),
            (Self.position(recordedAt: Self.now - .milliseconds(600_001)), "'recordedAt' is older than 600 s"),
        ]
        for (position, problem) in refused {
            #expect(throws: LocationRuleViolation.invalidPosition(problem)) {
                try TrackingRules.validate(position, now: Self.now, settings: Self.settings)
            }
        }
    }

    @Test("a live job is silent once nothing was heard for longer than the limit since it started")
    func staleness() {
        var job = Self.job(.delivery)
        job.trackingStartedAt = Self.now - .seconds(100)
        let limit = Duration.seconds(30)
        #expect(TrackingRules.isSilent(job, lastHeard: Self.now - .seconds(31), now: Self.now, staleAfter: limit))
        #expect(!TrackingRules.isSilent(job, lastHeard: Self.now - .seconds(30), now: Self.now, staleAfter: limit))
        #expect(TrackingRules.isSilent(job, lastHeard: nil, now: Self.now, staleAfter: limit), "never heard")
        job.trackingStartedAt = Self.now - .seconds(5)
        #expect(
            !TrackingRules.isSilent(job, lastHeard: Self.now - .seconds(300), now: Self.now, staleAfter: limit),
            "a position from before tracking started does not make a new job stale")
        #expect(
            !TrackingRules.isSilent(
                Self.job(.delivery, state: .stale), lastHeard: nil, now: Self.now, staleAfter: limit))
    }

    @Test("travel mode is the assigned technician's; a job is the customer's to watch")
    func permissions() throws {
        let request = Self.job(.serviceRequest)
        #expect(try TrackingRules.requireTravelModeSwitch(request, jobId: "job-1", by: "courier-1") == request)
        #expect(throws: LocationRuleViolation.notAssignedTechnician) {
            try TrackingRules.requireTravelModeSwitch(request, jobId: "job-1", by: "someone-else")
        }
        #expect(throws: LocationRuleViolation.jobNotFound("job-1", kind: .serviceRequest)) {
            try TrackingRules.requireTravelModeSwitch(Self.job(.delivery), jobId: "job-1", by: "courier-1")
        }
        let customer = Identity(userId: "customer-1", role: .customer)
        #expect(try TrackingRules.requireWatcher(request, jobId: "job-1", customer: customer) == request)
        #expect(throws: LocationRuleViolation.notJobCustomer) {
            try TrackingRules.requireWatcher(
                request, jobId: "job-1", customer: Identity(userId: "customer-2", role: .customer))
        }
        #expect(throws: LocationRuleViolation.jobNotFound("job-9", kind: nil)) {
            try TrackingRules.requireWatcher(nil, jobId: "job-9", customer: customer)
        }
    }

    @Test("the travel-mode-off push names the limit in hours and links the request")
    func travelModeOffPush() {
        let push = TrackingRules.travelModeOffPush(
            Self.job(.serviceRequest), technicianId: "courier-1", maximumTracking: .seconds(4 * 3600), now: Self.now)
        #expect(push.kind == .travelModeOff)
        #expect(push.userId == "courier-1")
        #expect(push.body.hasPrefix("Travel mode was on for 4 hours"))
        #expect(push.data["link"] == "app://service-requests/job-1")
        #expect(push.notificationId == "travel-mode-off-job-1-1790000000")
        let short = TrackingRules.travelModeOffPush(
            Self.job(.serviceRequest), technicianId: "courier-1", maximumTracking: .seconds(90), now: Self.now)
        #expect(short.body.hasPrefix("Travel mode was on for 2 minutes,"))
        let hour = TrackingRules.travelModeOffPush(
            Self.job(.serviceRequest), technicianId: "courier-1", maximumTracking: .seconds(3600), now: Self.now)
        #expect(hour.body.hasPrefix("Travel mode was on for 1 hour,"))
    }
}
