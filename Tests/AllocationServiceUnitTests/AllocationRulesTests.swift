import AllocationService
import Contracts
import Foundation
import ServiceKit
import Testing

@Suite("Allocation rules: answering offers, terms, retries, going online, the offer push")
struct AllocationRulesTests {
    static let settings = try! AllocationSettings(
        environment: ServiceEnvironment([
            "OFFER_TIMEOUT_SECONDS": "60", "OFFER_RECEIPT_TIMEOUT_SECONDS": "10", "ALLOCATION_RETRY_INITIAL_MS": "1500",
            "ALLOCATION_RETRY_MAX_SECONDS": "10", "PRECISE_LOCATION_ACCURACY_METERS": "50",
            "PRECISE_LOCATION_MAX_AGE_SECONDS": "120",
        ]))
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("an offer can be answered while pending and before its deadline, to the millisecond")
    func answeringAnOffer() throws {
        let deadline = Self.now.addingTimeInterval(0.001)
        try AllocationRules.requirePending(.pending, expiresAt: deadline, now: Self.now)
        #expect(throws: AllocationRuleViolation.offerExpired) {
            try AllocationRules.requirePending(.pending, expiresAt: Self.now, now: Self.now)
        }
        #expect(throws: AllocationRuleViolation.offerExpired) {
            try AllocationRules.requirePending(.timedOut, expiresAt: deadline, now: Self.now)
        }
        #expect(throws: AllocationRuleViolation.offerExpired) {
            try AllocationRules.requirePending(.unreachable, expiresAt: deadline, now: Self.now)
        }
        #expect(throws: AllocationRuleViolation.offerRescinded) {
            try AllocationRules.requirePending(.rescinded, expiresAt: deadline, now: Self.now)
        }
        #expect(throws: AllocationRuleViolation.offerNotPending(.accepted)) {
            try AllocationRules.requirePending(.accepted, expiresAt: deadline, now: Self.now)
        }
        #expect(throws: AllocationRuleViolation.offerNotPending(.rejected)) {
            try AllocationRules.requirePending(.rejected, expiresAt: deadline, now: Self.now)
        }
    }

    @Test("terms: distances to a tenth of a km, ₹25 + ₹10/km in whole rupees, deadlines from the same instant")
    func terms() {
        let terms = AllocationRules.terms(
            toVendorMeters: 1049, toCustomerMeters: 3020, now: Self.now, settings: Self.settings)
        #expect(terms.distanceKm == 1.0)
        #expect(terms.tripKm == 4.1)
        #expect(terms.earnings == 66)  // 25 + 40.69, rounded
        #expect(terms.expiresAt == Self.now.addingTimeInterval(60))
        #expect(terms.receiptDeadline == Self.now.addingTimeInterval(10))
        #expect(AllocationRules.earnings(tripKilometres: 0) == 25)
        #expect(AllocationRules.earnings(tripKilometres: 4) == 65)
    }

    @Test("an order nobody took waits 1.5 s, 3 s, 6 s, then the maximum; fractions are kept")
    func retryDelays() {
        let delays = (1...5).map { AllocationRules.retryDelay(afterAttempt: $0, settings: Self.settings) }
        #expect(delays == [.milliseconds(1500), .seconds(3), .seconds(6), .seconds(10), .seconds(10)])
        #expect(AllocationRules.retryDelay(afterAttempt: 10_000, settings: Self.settings) == .seconds(10))
        #expect(Self.now + .milliseconds(1500) == Self.now.addingTimeInterval(1.5))
    }

    @Test("going online needs a fix within 50 m, at most 120 s old and not from the future")
    func goingOnline() throws {
        func fix(accuracy: Double = 8, age: TimeInterval = 1) -> RiderLocation {
            RiderLocation(
                lat: 12.97, lng: 77.64, accuracyMeters: accuracy, recordedAt: Self.now.addingTimeInterval(-age))
        }
        let required = AllocationRuleViolation.preciseLocationRequired(accuracyMeters: 50, maxAgeSeconds: 120)
        #expect(try AllocationRules.requirePreciseFix(fix(), now: Self.now, settings: Self.settings) == fix())
        #expect(
            try AllocationRules.requirePreciseFix(fix(accuracy: 50, age: 120), now: Self.now, settings: Self.settings)
                .accuracyMeters == 50)
        #expect(throws: required) { try AllocationRules.requirePreciseFix(nil, now: Self.now, settings: Self.settings) }
        #expect(throws: required) {
            try AllocationRules.requirePreciseFix(fix(accuracy: 51), now: Self.now, settings: Self.settings)
        }
        #expect(throws: required) {
            try AllocationRules.requirePreciseFix(fix(age: 121), now: Self.now, settings: Self.settings)
        }
        #expect(throws: required) {
            try AllocationRules.requirePreciseFix(fix(age: -61), now: Self.now, settings: Self.settings)
        }
    }

    @Test("the offer push: high priority, the earnings, a deep link, alive as long as the offer")
    func offerPush() {
        let push = AllocationRules.offerPush(
            offerId: "o-1", orderId: "order-1", riderId: "rider-1", earnings: 65, settings: Self.settings)
        #expect(push.userId == "rider-1")
        #expect(push.title == "New delivery offer")
        #expect(push.body == "New delivery offer! Earn an estimated ₹65.")
        #expect(push.priority == .high)
        #expect(push.ttlSeconds == 60)
        #expect(push.collapseKey == "offer-o-1")
        #expect(push.data["link"] == "app://offers/o-1")
    }
}
