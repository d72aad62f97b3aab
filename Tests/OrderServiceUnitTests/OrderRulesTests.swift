import Contracts
import OrderService
import Testing

@Suite("Order state machine")
struct OrderRulesTests {
    static let rider = PersonRef(id: "r1", name: "Ravi")
    static let vendor = OrderActor(id: "v1", role: .vendor)
    static let customer = OrderActor(id: "c1", role: .customer)
    static let assignedRider = OrderActor(id: "r1", role: .rider)
    static let otherRider = OrderActor(id: "r2", role: .rider)
    static let admin = OrderActor(id: "a1", role: .admin)

    static func order(
        _ status: OrderStatus, rider: PersonRef? = nil, arrived: Bool = false, payment: PaymentMode = .prepaid,
        proof: Bool = false, photo: Bool = false
    ) -> OrderSnapshot {
        OrderSnapshot(
            status: status, customerId: "c1", vendorId: "v1", rider: rider, riderArrived: arrived, paymentMode: payment,
            requiresPhotoProof: proof, hasProofPhoto: photo
        )
    }

    @Test("the happy path: accept, ready, assign, arrive, pick up, deliver")
    func happyPath() throws {
        var order = Self.order(.pendingVendorAcceptance)
        order = try OrderRules.apply(.accept, to: order, by: Self.vendor)
        #expect(order.status == .preparing)
        order = try OrderRules.apply(.markReady, to: order, by: Self.vendor)
        #expect(order.status == .readyForPickup)
        order = try OrderRules.apply(.assignRider(Self.rider), to: order, by: nil)
        #expect(order.rider == Self.rider)
        order = try OrderRules.apply(.arrive, to: order, by: Self.assignedRider)
        #expect(order.riderArrived)
        order = try OrderRules.apply(.pickUp, to: order, by: Self.assignedRider)
        #expect(order.status == .inTransit)
        order = try OrderRules.apply(.deliver, to: order, by: Self.assignedRider)
        #expect(order.status == .delivered)
    }

    @Test(
        "every action is refused outside its states",
        arguments: [
            (OrderAction.accept, OrderActor?.some(vendor), [OrderStatus.pendingVendorAcceptance]),
            (.markReady, vendor, [.preparing]),
            (.arrive, assignedRider, [.preparing, .readyForPickup]),
            (.pickUp, assignedRider, [.readyForPickup]),
            (.deliver, assignedRider, [.inTransit]),
            (.uploadProofPhoto, assignedRider, [.inTransit]),
            (.cancel, admin, [.pendingVendorAcceptance, .preparing, .readyForPickup, .inTransit]),
            (.assignRider(PersonRef(id: "r9", name: "N")), nil, [.preparing, .readyForPickup]),
            (.unassignRider, nil, [.preparing, .readyForPickup]),
        ]
    )
    func statesOfEachAction(action: OrderAction, actor: OrderActor?, allowed: [OrderStatus]) {
        for status in OrderStatus.allCases {
            let order = Self.order(status, rider: Self.rider, arrived: action == .pickUp)
            do {
                _ = try OrderRules.apply(action, to: order, by: actor)
                #expect(allowed.contains(status), "\(action) was allowed in \(status)")
            } catch {
                #expect(!allowed.contains(status), "\(action) was refused in \(status): \(error)")
                if status == .cancelled {
                    #expect(error == .cancelled)
                } else {
                    #expect(error == .stateConflict(current: status, allowed: allowed))
                }
            }
        }
    }

    @Test("only the order's vendor accepts and marks ready")
    func vendorActions() {
        for actor in [Self.customer, Self.assignedRider, Self.admin, OrderActor(id: "v2", role: .vendor)] {
            #expect(throws: OrderRuleViolation.forbidden("only the order's vendor may do this")) {
                try OrderRules.apply(.accept, to: Self.order(.pendingVendorAcceptance), by: actor)
            }
        }
    }

    @Test(
        "rider actions: another rider gets NOT_ASSIGNED_RIDER, other roles FORBIDDEN, and the rider check comes first")
    func riderActions() {
        let order = Self.order(.readyForPickup, rider: Self.rider, arrived: true)
        #expect(throws: OrderRuleViolation.notAssignedRider) {
            try OrderRules.apply(.pickUp, to: order, by: Self.otherRider)
        }
        #expect(throws: OrderRuleViolation.forbidden("only the assigned rider may do this")) {
            try OrderRules.apply(.pickUp, to: order, by: Self.vendor)
        }
        #expect(throws: OrderRuleViolation.notAssignedRider) {
            try OrderRules.apply(.pickUp, to: Self.order(.cancelled, rider: Self.rider), by: Self.otherRider)
        }
        #expect(throws: OrderRuleViolation.cancelled) {
            try OrderRules.apply(
                .pickUp, to: Self.order(.cancelled, rider: Self.rider, arrived: true), by: Self.assignedRider)
        }
    }

    @Test("pickup needs the rider's arrival; arrival is confirmed once")
    func arrival() {
        #expect(throws: OrderRuleViolation.riderNotArrived) {
            try OrderRules.apply(.pickUp, to: Self.order(.readyForPickup, rider: Self.rider), by: Self.assignedRider)
        }
        #expect(throws: OrderRuleViolation.self) {
            try OrderRules.apply(
                .arrive, to: Self.order(.readyForPickup, rider: Self.rider, arrived: true), by: Self.assignedRider)
        }
    }

    @Test("a prepaid order needing photo proof is not delivered without the photo; cash or with a photo it is")
    func photoProof() throws {
        #expect(throws: OrderRuleViolation.proofPhotoRequired) {
            try OrderRules.apply(
                .deliver, to: Self.order(.inTransit, rider: Self.rider, proof: true), by: Self.assignedRider)
        }
        _ = try OrderRules.apply(
            .deliver, to: Self.order(.inTransit, rider: Self.rider, payment: .cash, proof: true), by: Self.assignedRider
        )
        _ = try OrderRules.apply(
            .deliver, to: Self.order(.inTransit, rider: Self.rider, proof: true, photo: true), by: Self.assignedRider)
    }

    @Test("cancelling: the customer and the vendor only before pickup, admins until delivery, others never")
    func cancelling() throws {
        _ = try OrderRules.apply(.cancel, to: Self.order(.readyForPickup), by: Self.customer)
        _ = try OrderRules.apply(.cancel, to: Self.order(.readyForPickup), by: Self.vendor)
        for actor in [Self.customer, Self.vendor] {
            #expect(
                throws: OrderRuleViolation.stateConflict(
                    current: .inTransit, allowed: [.pendingVendorAcceptance, .preparing, .readyForPickup])
            ) {
                try OrderRules.apply(.cancel, to: Self.order(.inTransit, rider: Self.rider), by: actor)
            }
        }
        _ = try OrderRules.apply(.cancel, to: Self.order(.inTransit, rider: Self.rider), by: Self.admin)
        for actor in [Self.assignedRider, OrderActor(id: "c2", role: .customer), OrderActor(id: "v2", role: .vendor)] {
            #expect(throws: OrderRuleViolation.self) {
                try OrderRules.apply(.cancel, to: Self.order(.preparing), by: actor)
            }
        }
    }

    @Test("re-assignment to another rider resets arrival; the same rider again changes nothing")
    func reassignment() throws {
        let order = Self.order(.readyForPickup, rider: Self.rider, arrived: true)
        let reassigned = try OrderRules.apply(.assignRider(PersonRef(id: "r2", name: "Ria")), to: order, by: nil)
        #expect(reassigned.rider?.id == "r2")
        #expect(!reassigned.riderArrived)
        #expect(try OrderRules.apply(.assignRider(Self.rider), to: order, by: nil) == order)
    }

    @Test("an operator's release leaves the order without a rider, arrival reset, until allocation finds one")
    func release() throws {
        let order = Self.order(.readyForPickup, rider: Self.rider, arrived: true)
        let released = try OrderRules.apply(.unassignRider, to: order, by: nil)
        #expect(released.rider == nil && !released.riderArrived && released.status == .readyForPickup)
        #expect(throws: OrderRuleViolation.notAssignedRider) {
            try OrderRules.apply(.arrive, to: released, by: Self.assignedRider)
        }
    }
}

@Suite("Service request state machine")
struct ServiceRequestRulesTests {
    static let technician = PersonRef(id: "t1", name: "Tara")

    @Test("assign, on the way, work in progress, completed; nothing skipped; only the assigned technician")
    func lifecycle() throws {
        var request = ServiceRequestSnapshot(status: .requested, customerId: "c1")
        let admin = OrderActor(id: "a", role: .admin)
        let tech = OrderActor(id: "t1", role: .technician)
        #expect(throws: ServiceRequestRuleViolation.self) {
            try ServiceRequestRules.apply(.assign(Self.technician), to: request, by: tech)
        }
        request = try ServiceRequestRules.apply(.assign(Self.technician), to: request, by: admin)
        #expect(request.status == .technicianAssigned)
        #expect(throws: ServiceRequestRuleViolation.self) {
            try ServiceRequestRules.apply(.advance(to: .workInProgress), to: request, by: tech)
        }
        #expect(throws: ServiceRequestRuleViolation.self) {
            try ServiceRequestRules.apply(
                .advance(to: .onTheWay), to: request, by: OrderActor(id: "t2", role: .technician))
        }
        for status in [ServiceRequestStatus.onTheWay, .workInProgress, .completed] {
            request = try ServiceRequestRules.apply(.advance(to: status), to: request, by: tech)
            #expect(request.status == status)
        }
        #expect(throws: ServiceRequestRuleViolation.self) {
            try ServiceRequestRules.apply(.cancel, to: request, by: OrderActor(id: "c1", role: .customer))
        }
    }

    @Test(
        "a page cursor is <microseconds>.<uuid> with a time from 1970 to the end of 9999; anything else is none",
        arguments: [
            ("0.00000000-0000-0000-0000-000000000000", true),
            ("1764000000000000.3f2504e0-4f89-41d3-9a0c-0305e82c3301", true),
            ("253402300799999999.3f2504e0-4f89-41d3-9a0c-0305e82c3301", true),
            ("253402300800000000.3f2504e0-4f89-41d3-9a0c-0305e82c3301", false),
            ("9223372036854775807.00000000-0000-0000-0000-000000000000", false),
            ("-9223372036854775808.00000000-0000-0000-0000-000000000000", false),
            ("-9000000000000000000.00000000-0000-0000-0000-000000000000", false),
            ("-1.00000000-0000-0000-0000-000000000000", false),
            ("9223372036854775808.00000000-0000-0000-0000-000000000000", false),
            ("1.5.00000000-0000-0000-0000-000000000000", false),
            ("12.not-a-uuid", false),
            ("", false),
        ])
    func pageCursor(text: String, valid: Bool) {
        let cursor = OrderPageCursor(text: text)
        #expect((cursor != nil) == valid)
        if let cursor { #expect(OrderPageCursor(text: cursor.text) == cursor) }
    }
}

extension OrderAction: CustomTestStringConvertible {
    public var testDescription: String { "\(self)" }
}
