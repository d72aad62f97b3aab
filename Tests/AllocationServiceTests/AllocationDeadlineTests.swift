import AllocationService
import Contracts
import Foundation
import PostgresNIO
import ServiceKit
import TestSupport
import Testing

/// Offer deadlines on a manual clock against the real schema: no test here waits for time to pass.
@Suite("Allocation deadlines on a manual clock")
struct AllocationDeadlineTests {
    static let settings = try! AllocationSettings(
        environment: ServiceEnvironment([
            "OFFER_TIMEOUT_SECONDS": "60", "OFFER_RECEIPT_TIMEOUT_SECONDS": "10", "ALLOCATION_RETRY_INITIAL_MS": "1500",
        ]))

    /// Who each notice is for, and what it says.
    static func describe(_ notices: [RiderNotice]) -> [String] {
        notices.map { notice in
            switch notice {
            case .offer(let riderId, _): "offer to \(riderId)"
            case .expired(let riderId, _, _): "expired for \(riderId)"
            case .rescinded(let riderId, _, _): "rescinded for \(riderId)"
            case .orderCancelled(let riderId, _): "order cancelled for \(riderId)"
            case .wentOffline(let riderId, let reason): "offline (\(reason.rawValue)) for \(riderId)"
            case .assigned(let riderId, _): "assigned to \(riderId)"
            case .unassigned(let riderId, _): "unassigned from \(riderId)"
            }
        }
    }

    /// Runs `body` with a workflow on a fresh schema whose time is a manual clock.
    static func withWorkflow(
        _ body: @Sendable (Database, AllocationWorkflow, ManualClock) async throws -> Void
    ) async throws {
        let schema = uniqueName("allocation")
        let migrations = [try MigrationSet.platform(), try AllocationService.migrations()]
        try await withTestDatabase(schema: schema, migrations: migrations) { database in
            let clock = ManualClock()
            let workflow = AllocationWorkflow(
                settings: settings, outbox: Outbox(schema: schema, now: clock.now), now: clock.now,
                logger: TestInfrastructure.logger("allocation-deadlines"))
            try await body(database, workflow, clock)
        }
    }

    /// The push provider accepted the offer push of `orderId` to `riderId` (notifications.events).
    static func offerPushAccepted(orderId: String, riderId: String, at sentAt: Date) throws -> DecodedEvent {
        try AllocationOperatorTests.event(
            PushSent(
                notificationId: "offer-x", userId: riderId, kind: .offer, correlationId: orderId, deviceCount: 1,
                sentAt: sentAt), orderId: riderId)
    }

    static func offerId(_ notices: [RiderNotice]) -> UUID? {
        for case .offer(_, let view) in notices { return UUID(uuidString: view.offerId) }
        return nil
    }

    @Test(
        "an offer times out at its deadline, not a millisecond before; an unconfirmed one is skipped at its receipt deadline"
    )
    func deadlines() async throws {
        try await Self.withWorkflow { database, workflow, clock in
            let near = PersonRef(id: uniqueName("near"), name: "Near")
            let far = PersonRef(id: uniqueName("far"), name: "Far")
            let (orderId, nearOffer) = try await AllocationOperatorTests.readyOrder(
                riders: [near, far], database: database, workflow: workflow, clock: clock)
            _ = try await database.transaction { try await workflow.received(nearOffer, riderId: near.id, on: $0) }

            clock.advance(by: .milliseconds(59_999))
            #expect(try await database.transaction { try await workflow.runDeadlines(on: $0) }.isEmpty)
            clock.advance(by: .milliseconds(2))
            let expired = try await database.transaction { try await workflow.runDeadlines(on: $0) }
            #expect(Self.describe(expired) == ["expired for \(near.id)", "offer to \(far.id)"])
            await #expect(throws: AllocationRuleViolation.offerExpired) {
                try await database.transaction { try await workflow.accept(nearOffer, rider: near, on: $0) }
            }
            #expect(try await database.transaction { try await workflow.rider(near.id, on: $0) }.status == .online)

            // The far rider has no socket: the receipt window starts when the offer push is accepted (the fallback
            // deadline, window plus grace, is later). Accepted 3 s in, the app never confirms: skipped 10 s after
            // the acceptance and taken offline; the near rider was already offered the order, so nobody is left
            // and the order waits.
            clock.advance(by: .seconds(3))
            #expect(try await database.transaction { try await workflow.runDeadlines(on: $0) }.isEmpty)
            let accepted = try Self.offerPushAccepted(orderId: orderId, riderId: far.id, at: clock.now())
            #expect(try await database.transaction { try await workflow.pushOutcome(accepted, on: $0) }.isEmpty)
            clock.advance(by: .milliseconds(9_999))
            #expect(try await database.transaction { try await workflow.runDeadlines(on: $0) }.isEmpty)
            clock.advance(by: .milliseconds(2))
            let skipped = try await database.transaction { try await workflow.runDeadlines(on: $0) }
            #expect(Self.describe(skipped) == ["offline (unreachable) for \(far.id)"])
            let farView = try await database.transaction { try await workflow.rider(far.id, on: $0) }
            #expect(farView.status == .offline && farView.offlineReason == .unreachable)
            #expect(farView.offlineMessage?.contains("could not reach your phone") == true)
            let status = try await database.scalar(
                "SELECT status FROM allocations WHERE order_id = \(orderId)", as: String.self)
            #expect(status == "waiting")
            let failures = try await database.scalar(
                "SELECT count(*) FROM outbox WHERE event_type = 'AllocationFailed' AND message_key = \(orderId)",
                as: Int.self)
            #expect(failures == 1)
        }
    }

    @Test(
        "a receipt deadline that passes while the database is unreachable moves by the outage's length, once however many instances come back"
    )
    func receiptDeadlineAfterOutage() async throws {
        try await Self.withWorkflow { database, workflow, clock in
            let near = PersonRef(id: uniqueName("near"), name: "Near")
            let far = PersonRef(id: uniqueName("far"), name: "Far")
            let (orderId, nearOffer) = try await AllocationOperatorTests.readyOrder(
                riders: [near, far], database: database, workflow: workflow, clock: clock)
            let accepted = try Self.offerPushAccepted(orderId: orderId, riderId: near.id, at: clock.now())
            _ = try await database.transaction { try await workflow.pushOutcome(accepted, on: $0) }
            let receiptDeadline: PostgresQuery = "SELECT receipt_deadline FROM offers WHERE offer_id = \(nearOffer)"
            let deadline = try #require(try await database.scalar(receiptDeadline, as: Date.self))
            #expect(try await database.transaction { try await workflow.runDeadlines(on: $0) }.isEmpty)

            // 15 s without a round: the 10 s receipt window ended within the outage. Two instances come back; the
            // first moves the deadline by 15 s, the second finds the clock just moved.
            clock.advance(by: .seconds(15))
            for _ in 0..<2 {
                let notices = try await database.transaction {
                    try await workflow.runDeadlines(afterOutage: true, on: $0)
                }
                #expect(notices.isEmpty)
            }
            let moved = try #require(try await database.scalar(receiptDeadline, as: Date.self))
            #expect(abs(moved.timeIntervalSince(deadline) - 15) < 0.001)

            clock.advance(by: .milliseconds(9_990))
            #expect(try await database.transaction { try await workflow.runDeadlines(on: $0) }.isEmpty)
            clock.advance(by: .milliseconds(20))
            let skipped = try await database.transaction { try await workflow.runDeadlines(on: $0) }
            #expect(Self.describe(skipped) == ["offline (unreachable) for \(near.id)", "offer to \(far.id)"])
        }
    }

    @Test(
        "a rider with no socket whose offer push no device can take (none registered, tokens dead) is unreachable at once; one whose app confirmed keeps the offer past the window"
    )
    func undeliverableOfferPush() async throws {
        try await Self.withWorkflow { database, workflow, clock in
            let silent = PersonRef(id: uniqueName("silent"), name: "Silent")
            let backgrounded = PersonRef(id: uniqueName("backgrounded"), name: "Backgrounded")
            let (orderId, _) = try await AllocationOperatorTests.readyOrder(
                riders: [silent, backgrounded], database: database, workflow: workflow, clock: clock)
            clock.advance(by: .seconds(1))
            let failed = try AllocationOperatorTests.event(
                PushFailed(
                    notificationId: "offer-x", userId: silent.id, kind: .offer, correlationId: orderId,
                    reason: PushFailed.noDevicesReason, failedAt: clock.now()), orderId: silent.id)
            let skipped = try await database.transaction { try await workflow.pushOutcome(failed, on: $0) }
            #expect(
                Self.describe(skipped) == ["offline (unreachable) for \(silent.id)", "offer to \(backgrounded.id)"])
            // The same outcome again changes nothing.
            #expect(try await database.transaction { try await workflow.pushOutcome(failed, on: $0) }.isEmpty)

            // The backgrounded rider's push is accepted and its handler confirms: the window no longer applies, and
            // a late failure report for another device changes nothing.
            let offerId = try #require(Self.offerId(skipped))
            let sent = try AllocationOperatorTests.event(
                PushSent(
                    notificationId: "offer-y", userId: backgrounded.id, kind: .offer, correlationId: orderId,
                    deviceCount: 1, sentAt: clock.now()), orderId: backgrounded.id)
            _ = try await database.transaction { try await workflow.pushOutcome(sent, on: $0) }
            _ = try await database.transaction {
                try await workflow.received(offerId, riderId: backgrounded.id, on: $0)
            }
            clock.advance(by: .seconds(30))
            #expect(try await database.transaction { try await workflow.runDeadlines(on: $0) }.isEmpty)
            let lateFailure = try AllocationOperatorTests.event(
                PushFailed(
                    notificationId: "offer-y", userId: backgrounded.id, kind: .offer, correlationId: orderId,
                    reason: PushFailed.invalidTokenReason, failedAt: clock.now()), orderId: backgrounded.id)
            #expect(try await database.transaction { try await workflow.pushOutcome(lateFailure, on: $0) }.isEmpty)
            let offer = try await database.transaction { try await workflow.offer(offerId, on: $0) }
            #expect(offer.status == .pending)
        }
    }

    @Test(
        "a push the provider or our credentials failed says nothing about the rider: without an outcome the offer waits for the receipt window plus OFFER_PUSH_GRACE_SECONDS"
    )
    func providerFailureFallsBackToTheGrace() async throws {
        try await Self.withWorkflow { database, workflow, clock in
            let silent = PersonRef(id: uniqueName("silent"), name: "Silent")
            let (orderId, _) = try await AllocationOperatorTests.readyOrder(
                riders: [silent], database: database, workflow: workflow, clock: clock)
            let refused = try AllocationOperatorTests.event(
                PushFailed(
                    notificationId: "offer-x", userId: silent.id, kind: .offer, correlationId: orderId,
                    reason: "refused", failedAt: clock.now()), orderId: silent.id)
            #expect(try await database.transaction { try await workflow.pushOutcome(refused, on: $0) }.isEmpty)
            clock.advance(by: .milliseconds(29_999))  // the receipt window (10 s) and the grace (20 s)
            #expect(try await database.transaction { try await workflow.runDeadlines(on: $0) }.isEmpty)
            clock.advance(by: .milliseconds(2))
            let skipped = try await database.transaction { try await workflow.runDeadlines(on: $0) }
            #expect(Self.describe(skipped) == ["offline (unreachable) for \(silent.id)"])
        }
    }

    @Test(
        "an Online rider without a precise fix for RIDER_OFFLINE_WITHOUT_FIX_SECONDS is taken Offline and told why, not a moment before; a coarse position does not count; going Online clears the reason"
    )
    func offlineWithoutPreciseFix() async throws {
        try await Self.withWorkflow { database, workflow, clock in
            let point = TestSpot().north(1)
            let rider = PersonRef(id: uniqueName("rider"), name: "Ravi")
            func fix(accuracy: Double) -> RiderLocation {
                RiderLocation(lat: point.lat, lng: point.lng, accuracyMeters: accuracy, recordedAt: clock.now())
            }
            func position(accuracy: Double) -> PositionUpdated {
                PositionUpdated(
                    courierId: rider.id, role: .rider, lat: point.lat, lng: point.lng, accuracyMeters: accuracy,
                    headingDegrees: nil, speedMps: nil, recordedAt: clock.now())
            }
            _ = try await database.transaction {
                try await workflow.setAvailability(rider: rider, online: true, location: fix(accuracy: 5), on: $0)
            }
            clock.advance(by: .seconds(200))
            try await database.transaction { try await workflow.moved(position(accuracy: 5), on: $0) }
            clock.advance(by: .seconds(100))
            try await database.transaction { try await workflow.moved(position(accuracy: 10_000), on: $0) }
            clock.advance(by: .seconds(199))
            #expect(try await database.transaction { try await workflow.runDeadlines(on: $0) }.isEmpty)
            clock.advance(by: .seconds(2))
            let demoted = try await database.transaction { try await workflow.runDeadlines(on: $0) }
            #expect(Self.describe(demoted) == ["offline (no_precise_location) for \(rider.id)"])
            let view = try await database.transaction { try await workflow.rider(rider.id, on: $0) }
            #expect(view.status == .offline && view.offlineReason == .noPreciseLocation)
            #expect(view.offlineMessage?.hasPrefix("You were set Offline: no precise location for 5 minutes") == true)
            let pushes = try await database.scalar(
                "SELECT count(*) FROM outbox WHERE event_type = 'PushRequested' AND message_key = \(rider.id)",
                as: Int.self)
            #expect(pushes == 1)

            let back = try await database.transaction {
                try await workflow.setAvailability(rider: rider, online: true, location: fix(accuracy: 5), on: $0)
            }
            #expect(back.0.status == .online && back.0.offlineReason == nil)
        }
    }
}
