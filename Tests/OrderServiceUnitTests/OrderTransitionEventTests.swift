import Contracts
import Foundation
import Testing

@testable import OrderService

/// Which event each applied order action records, decided without a database.
@Suite("Order transition events")
struct OrderTransitionEventTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let ravi = PersonRef(id: "r1", name: "Ravi")
    static let sana = PersonRef(id: "r2", name: "Sana")

    static func order(_ status: OrderStatus, rider: PersonRef? = nil) -> OrderView {
        let address = Address(line1: "1 Main St", area: "Indiranagar", lat: 12.97, lng: 77.64)
        return OrderView(
            id: "o-1", status: status, customerId: "c1",
            vendor: VendorRef(id: "v1", name: "Dosa Corner", address: address), deliveryAddress: address,
            paymentMode: .prepaid, totalAmount: 250, requiresPhotoProof: false, rider: rider, riderArrivedAt: nil,
            proofPhoto: nil, version: 2, createdAt: now, updatedAt: now)
    }

    static func payload(
        _ action: OrderAction, _ order: OrderView, previousRider: PersonRef? = nil, actor: OrderActor? = nil,
        reason: String? = nil
    ) -> (any EventPayload)? {
        OrderTransitionEvent.payload(
            for: action, order: order, previousRider: previousRider, actor: actor, reason: reason, offerId: "of-1",
            at: now)
    }

    @Test("each lifecycle action records its event type")
    func eventTypes() {
        let rider = OrderActor(id: "r1", role: .rider)
        let cases: [(OrderAction, OrderView, String?)] = [
            (.accept, Self.order(.preparing), "OrderAccepted"),
            (.markReady, Self.order(.readyForPickup), "OrderReadyForPickup"),
            (.arrive, Self.order(.readyForPickup, rider: Self.ravi), "RiderArrivedAtStore"),
            (.pickUp, Self.order(.inTransit, rider: Self.ravi), "OrderPickedUp"),
            (.deliver, Self.order(.delivered, rider: Self.ravi), "OrderDelivered"),
            (.cancel, Self.order(.cancelled), "OrderCancelled"),
            (.uploadProofPhoto, Self.order(.inTransit, rider: Self.ravi), nil),
        ]
        for (action, order, expected) in cases {
            let payload = Self.payload(action, order, actor: rider)
            #expect(payload.map { type(of: $0).eventType } == expected, "\(action)")
        }
    }

    @Test("a rider assigned where another was is a reassignment naming both; the first is an assignment")
    func assignment() throws {
        let first = try #require(Self.payload(.assignRider(Self.ravi), Self.order(.readyForPickup, rider: Self.ravi)))
        #expect(
            first as? RiderAssigned
                == RiderAssigned(
                    orderId: "o-1", customerId: "c1", vendorId: "v1", offerId: "of-1", rider: Self.ravi))
        let again = try #require(
            Self.payload(
                .assignRider(Self.sana), Self.order(.readyForPickup, rider: Self.sana), previousRider: Self.ravi))
        #expect((again as? RiderReassigned)?.previousRiderId == "r1")
        #expect((again as? RiderReassigned)?.rider == Self.sana)
        let back = try #require(Self.payload(.unassignRider, Self.order(.readyForPickup), previousRider: Self.ravi))
        #expect((back as? RiderUnassigned)?.previousRiderId == "r1")
    }

    @Test("the pickup names the order's rider, or the acting rider if it has none, and the injected time")
    func pickup() throws {
        let actor = OrderActor(id: "r9", role: .rider)
        let named = try #require(Self.payload(.pickUp, Self.order(.inTransit, rider: Self.ravi), actor: actor))
        #expect((named as? OrderPickedUp)?.rider == Self.ravi)
        #expect((named as? OrderPickedUp)?.pickedUpAt == Self.now)
        let unnamed = try #require(Self.payload(.pickUp, Self.order(.inTransit), actor: actor))
        #expect((unnamed as? OrderPickedUp)?.rider == PersonRef(id: "r9", name: ""))
    }

    @Test("a cancellation by nobody is the admin's, with its reason")
    func cancellation() throws {
        let cancelled = try #require(Self.payload(.cancel, Self.order(.cancelled), reason: "closed"))
        #expect((cancelled as? OrderCancelled)?.cancelledBy == .admin)
        #expect((cancelled as? OrderCancelled)?.reason == "closed")
    }
}
