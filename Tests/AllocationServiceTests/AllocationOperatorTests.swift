import AllocationService
import Contracts
import Foundation
import ServiceKit
import TestSupport
import Testing

/// An operator re-assigns or releases an order (CUS-032 8.2) against the real schema, with Order's answers fed in
/// as the events it would publish.
@Suite("Allocation: operators re-assign and release orders")
struct AllocationOperatorTests {
    static func event(_ payload: some EventPayload, orderId: String) throws -> DecodedEvent {
        try EventCatalog.decode(
            ContractCoding.encode(EventEnvelope(aggregateId: orderId, occurredAt: Date(), payload: payload)))
    }

    /// Riders `ids` Online at 1, 2, 3... km north of a spot, and an order ready there, offered to the nearest.
    static func readyOrder(
        riders ids: [PersonRef], database: Database, workflow: AllocationWorkflow, clock: ManualClock
    ) async throws -> (orderId: String, offerId: UUID) {
        let spot = TestSpot()
        for (index, rider) in ids.enumerated() {
            let point = spot.north(Double(index + 1))
            let fix = RiderLocation(lat: point.lat, lng: point.lng, accuracyMeters: 5, recordedAt: clock.now())
            _ = try await database.transaction {
                try await workflow.setAvailability(rider: rider, online: true, location: fix, on: $0)
            }
        }
        let orderId = UUID().uuidString.lowercased()
        let vendor = VendorRef(
            id: "vendor-1", name: "Spice Route",
            address: Address(line1: "12 MG Road", area: "Indiranagar", lat: spot.lat, lng: spot.lng))
        let ready = try event(
            OrderReadyForPickup(
                orderId: orderId, customerId: "customer-1", vendor: vendor, deliveryArea: "Koramangala",
                deliveryLocation: GeoPoint(lat: spot.north(-3).lat, lng: spot.lng), totalAmount: 10),
            orderId: orderId)
        let offered = try await database.transaction { try await workflow.apply(orderEvent: ready, on: $0) }
        #expect(AllocationDeadlineTests.describe(offered) == ["offer to \(ids[0].id)"], "the nearest rider first")
        return (orderId, try #require(AllocationDeadlineTests.offerId(offered)))
    }

    static func status(_ riderId: String, _ database: Database, _ workflow: AllocationWorkflow) async throws
        -> RiderStatus
    {
        try await database.transaction { try await workflow.rider(riderId, on: $0) }.status
    }

    static func outboxCount(_ eventType: String, key: String, _ database: Database) async throws -> Int? {
        try await database.scalar(
            "SELECT count(*) FROM outbox WHERE event_type = \(eventType) AND message_key = \(key)", as: Int.self)
    }

    @Test(
        "re-assigning gives the order to an Online rider at once and frees the previous one when Order confirms; both are told (pushed, with no socket)"
    )
    func reassign() async throws {
        try await AllocationDeadlineTests.withWorkflow { database, workflow, clock in
            let first = PersonRef(id: uniqueName("first"), name: "First")
            let second = PersonRef(id: uniqueName("second"), name: "Second")
            let (orderId, offerId) = try await Self.readyOrder(
                riders: [first, second], database: database, workflow: workflow, clock: clock)
            _ = try await database.transaction { try await workflow.accept(offerId, rider: first, on: $0) }

            await #expect(throws: AllocationRuleViolation.riderNotAvailable(riderId: "nobody", nil)) {
                try await database.transaction {
                    try await workflow.reassign(orderId: orderId, to: "nobody", by: "admin-1", on: $0)
                }
            }
            await #expect(throws: AllocationRuleViolation.allocationNotFound(orderId: "no-such-order")) {
                try await database.transaction {
                    try await workflow.reassign(orderId: "no-such-order", to: second.id, by: "admin-1", on: $0)
                }
            }
            let (decision, notices) = try await database.transaction {
                try await workflow.reassign(orderId: orderId, to: second.id, by: "admin-1", on: $0)
            }
            #expect(decision.previousRiderId == first.id && decision.riderId == second.id)
            #expect(AllocationDeadlineTests.describe(notices) == ["assigned to \(second.id)"])
            #expect(try await Self.status(second.id, database, workflow) == .delivering)
            // The first rider keeps the order until Order confirms: a pickup racing the operator still counts.
            #expect(try await Self.status(first.id, database, workflow) == .delivering)
            #expect(try await Self.outboxCount("OperatorAssignedRider", key: orderId, database) == 1)
            // Asking again for the same rider changes nothing.
            let (_, again) = try await database.transaction {
                try await workflow.reassign(orderId: orderId, to: second.id, by: "admin-1", on: $0)
            }
            #expect(again.isEmpty)
            #expect(try await Self.outboxCount("OperatorAssignedRider", key: orderId, database) == 1)

            let confirmed = try Self.event(
                RiderReassigned(
                    orderId: orderId, customerId: "customer-1", vendorId: "vendor-1", offerId: nil, rider: second,
                    previousRiderId: first.id), orderId: orderId)
            let told = try await database.transaction { try await workflow.apply(orderEvent: confirmed, on: $0) }
            #expect(AllocationDeadlineTests.describe(told) == ["unassigned from \(first.id)"])
            #expect(try await Self.status(first.id, database, workflow) == .online)
            // Neither rider has a socket here: both are pushed.
            #expect(try await Self.outboxCount("PushRequested", key: first.id, database) == 2)  // offer, unassigned
            #expect(try await Self.outboxCount("PushRequested", key: second.id, database) == 1)
            // A replay of Order's confirmation tells nobody twice.
            #expect(try await database.transaction { try await workflow.apply(orderEvent: confirmed, on: $0) }.isEmpty)

            // Once picked up the order keeps its rider.
            let pickedUp = try Self.event(
                OrderPickedUp(
                    orderId: orderId, customerId: "customer-1",
                    vendor: VendorRef(
                        id: "vendor-1", name: "Spice Route",
                        address: Address(line1: "12 MG Road", area: "Indiranagar", lat: 12.97, lng: 77.64)),
                    rider: second,
                    destination: Address(line1: "1 Main St", area: "Koramangala", lat: 12.93, lng: 77.62),
                    pickedUpAt: clock.now()), orderId: orderId)
            _ = try await database.transaction { try await workflow.apply(orderEvent: pickedUp, on: $0) }
            await #expect(throws: AllocationRuleViolation.notReassignable(.inTransit)) {
                try await database.transaction {
                    try await workflow.reassign(orderId: orderId, to: first.id, by: "admin-1", on: $0)
                }
            }
            await #expect(throws: AllocationRuleViolation.notReassignable(.inTransit)) {
                try await database.transaction { try await workflow.release(orderId: orderId, by: "admin-1", on: $0) }
            }
        }
    }

    @Test(
        "releasing offers the order to the next rider at once; the released rider is freed and told when Order confirms; a refusal frees only the refused rider"
    )
    func release() async throws {
        try await AllocationDeadlineTests.withWorkflow { database, workflow, clock in
            let first = PersonRef(id: uniqueName("first"), name: "First")
            let second = PersonRef(id: uniqueName("second"), name: "Second")
            let (orderId, offerId) = try await Self.readyOrder(
                riders: [first, second], database: database, workflow: workflow, clock: clock)
            await #expect(throws: AllocationRuleViolation.noRiderAssigned) {
                try await database.transaction { try await workflow.release(orderId: orderId, by: "admin-1", on: $0) }
            }
            _ = try await database.transaction { try await workflow.accept(offerId, rider: first, on: $0) }

            let (decision, offered) = try await database.transaction {
                try await workflow.release(orderId: orderId, by: "admin-1", on: $0)
            }
            #expect(decision.previousRiderId == first.id && decision.riderId == nil && decision.status == .searching)
            #expect(AllocationDeadlineTests.describe(offered) == ["offer to \(second.id)"])
            #expect(try await Self.outboxCount("OperatorReleasedOrder", key: orderId, database) == 1)
            let unassigned = try Self.event(
                RiderUnassigned(
                    orderId: orderId, customerId: "customer-1", vendorId: "vendor-1", previousRiderId: first.id),
                orderId: orderId)
            let told = try await database.transaction { try await workflow.apply(orderEvent: unassigned, on: $0) }
            #expect(AllocationDeadlineTests.describe(told) == ["unassigned from \(first.id)"])
            #expect(try await Self.status(first.id, database, workflow) == .online)

            // The operator gives it to the first rider again, but the order was picked up meanwhile by nobody
            // allocation knows (Order refuses: InTransit): only the refused rider is freed, and the order stays put.
            let (_, reassigned) = try await database.transaction {
                try await workflow.reassign(orderId: orderId, to: first.id, by: "admin-1", on: $0)
            }
            #expect(
                AllocationDeadlineTests.describe(reassigned) == [
                    "rescinded for \(second.id)", "assigned to \(first.id)",
                ])
            let refused = try Self.event(
                RiderAssignmentRefused(
                    orderId: orderId, offerId: nil, riderId: first.id, orderStatus: .status(.inTransit)),
                orderId: orderId)
            let refusal = try await database.transaction { try await workflow.apply(orderEvent: refused, on: $0) }
            #expect(AllocationDeadlineTests.describe(refusal) == ["unassigned from \(first.id)"])
            #expect(try await Self.status(first.id, database, workflow) == .online)
            #expect(try await Self.status(second.id, database, workflow) == .online)
            let status = try await database.scalar(
                "SELECT status FROM allocations WHERE order_id = \(orderId)", as: String.self)
            #expect(status == "in_transit")
        }
    }
}
