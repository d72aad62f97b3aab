import Contracts
import Foundation
import Hummingbird
import PostgresNIO
import RealtimePlatform

/// Where an order's allocation stands, as operators see it. After an operator's decision Order confirms it
/// asynchronously (RiderReassigned, RiderAssigned or RiderUnassigned on orders.events, or RiderAssignmentRefused).
package struct AllocationView: Codable, Sendable, Equatable, ResponseEncodable {
    package var orderId: String
    package var status: AllocationStatus
    /// The rider allocation gave the order to; nil while it searches.
    package var riderId: String?
    /// After a decision: the rider who held the order before, who is told once Order confirms.
    package var previousRiderId: String?
}

/// The order's fate after its offer: cancelled, picked up, refused; and operators (admins) re-assigning it before
/// pickup or releasing it back to allocation (CUS-032 8.2), settled by the order's events.
extension AllocationWorkflow {
    /// The order was cancelled: a pending offer is rescinded, an assigned rider released.
    func cancelled(_ cancelled: OrderCancelled, on connection: PostgresConnection) async throws -> [RiderNotice] {
        let orderId = cancelled.orderId
        var notices = try await rescindOffers(ofOrder: orderId, on: connection)
        let released = try await store.releaseRider(of: orderId, on: connection)
        try await store.endAllocation(orderId, status: .cancelled, on: connection)
        for riderId in released {
            // RDR-016 AC-004: the rider learns it at once, on their socket or by push.
            notices.append(
                try await tell(
                    .orderCancelled(riderId: riderId, orderId: orderId),
                    orElsePush: AllocationRules.cancellationPush(orderId: orderId, riderId: riderId), on: connection))
        }
        return notices
    }

    /// Rescinds the order's pending offer, if any: the rider is Online again and told.
    func rescindOffers(ofOrder orderId: String, on connection: PostgresConnection) async throws -> [RiderNotice] {
        var notices: [RiderNotice] = []
        for offer in try await store.pendingOffers(ofOrder: orderId, on: connection) {
            try await close(offer, as: .rescinded, riderBecomes: .online, on: connection)
            notices.append(
                .rescinded(riderId: offer.riderId, offerId: offer.offerId.uuidString.lowercased(), orderId: orderId))
        }
        return notices
    }

    /// Returns `notice` for the rider's live socket; a rider without one (or with the app in the background) gets
    /// `push` too.
    func tell(_ notice: RiderNotice, orElsePush push: PushRequested, on connection: PostgresConnection) async throws
        -> RiderNotice
    {
        if try await !presence.isPresent(
            userId: push.userId, room: SocketPresence.anywhere, now: now(), on: connection)
        {
            try await outbox.enqueue(push, aggregateId: push.userId, on: connection, logger: logger)
        }
        return notice
    }

    /// The order ended (delivered, or refused the rider): the rider is free again.
    func release(orderId: String, as status: AllocationStatus, on connection: PostgresConnection) async throws {
        _ = try await store.releaseRider(of: orderId, on: connection)
        try await store.endAllocation(orderId, status: status, on: connection)
    }

    /// Up to `limit` riders on duty, most recently changed first (the operators' live map).
    package func ridersOnDuty(limit: Int, on connection: PostgresConnection) async throws -> OnDutyRiders {
        OnDutyRiders(riders: try await store.ridersOnDuty(limit: limit, on: connection))
    }

    /// Order `orderId`'s allocation.
    package func allocation(_ orderId: String, on connection: PostgresConnection) async throws -> AllocationView {
        guard let allocation = try await store.lockAllocation(orderId, forUpdate: false, on: connection) else {
            throw AllocationRuleViolation.allocationNotFound(orderId: orderId)
        }
        return AllocationView(orderId: orderId, status: allocation.status, riderId: allocation.riderId)
    }

    /// Gives order `orderId` to the Online rider `riderId`: a pending offer of the order is rescinded, the rider
    /// holds the order at once, and Order is asked to assign them (OperatorAssignedRider). The previous rider is
    /// freed and told when Order confirms (RiderReassigned).
    package func reassign(orderId: String, to riderId: String, by operatorId: String, on connection: PostgresConnection)
        async throws -> (AllocationView, [RiderNotice])
    {
        guard let allocation = try await store.lockAllocation(orderId, on: connection) else {
            throw AllocationRuleViolation.allocationNotFound(orderId: orderId)
        }
        try AllocationRules.requireReassignable(allocation.status)
        if allocation.status == .assigned, allocation.riderId == riderId {
            return (AllocationView(orderId: orderId, status: .assigned, riderId: riderId), [])
        }
        let decision = AllocationView(
            orderId: orderId, status: .assigned, riderId: riderId, previousRiderId: allocation.riderId)
        let rider = try await store.lockRiderForAssignment(riderId, on: connection)
        try AllocationRules.requireAvailable(riderId: riderId, rider?.status)

        var notices = try await rescindOffers(ofOrder: orderId, on: connection)
        try await store.startDelivery(riderId, orderId: orderId, on: connection)
        try await store.setRider(orderId, riderId: riderId, status: .assigned, on: connection)
        try await outbox.enqueue(
            OperatorAssignedRider(
                orderId: orderId, rider: PersonRef(id: riderId, name: rider?.name ?? "Rider"), operatorId: operatorId),
            aggregateId: orderId, on: connection, logger: logger)
        notices.append(
            try await tell(
                .assigned(riderId: riderId, orderId: orderId),
                orElsePush: AllocationRules.assignedPush(orderId: orderId, riderId: riderId, at: now()), on: connection)
        )
        logger.info(
            "operator re-assigned an order",
            metadata: ["order.id": "\(orderId)", "rider.id": "\(riderId)", "operator.id": "\(operatorId)"])
        return (decision, notices)
    }

    /// Takes order `orderId` away from its rider and offers it again: Order is asked to unassign the rider
    /// (OperatorReleasedOrder), who is freed and told when Order confirms (RiderUnassigned).
    package func release(orderId: String, by operatorId: String, on connection: PostgresConnection) async throws
        -> (AllocationView, [RiderNotice])
    {
        guard let allocation = try await store.lockAllocation(orderId, on: connection) else {
            throw AllocationRuleViolation.allocationNotFound(orderId: orderId)
        }
        try AllocationRules.requireReassignable(allocation.status)
        guard allocation.status == .assigned, let riderId = allocation.riderId else {
            throw AllocationRuleViolation.noRiderAssigned
        }
        try await store.setRider(orderId, riderId: nil, status: .searching, on: connection)
        try await outbox.enqueue(
            OperatorReleasedOrder(orderId: orderId, riderId: riderId, operatorId: operatorId), aggregateId: orderId,
            on: connection, logger: logger)
        logger.info(
            "operator released an order",
            metadata: ["order.id": "\(orderId)", "rider.id": "\(riderId)", "operator.id": "\(operatorId)"])
        let notices = try await offerNext(orderId: orderId, on: connection)
        let after = try await store.lockAllocation(orderId, on: connection)
        return (
            AllocationView(
                orderId: orderId, status: after?.status ?? .searching, riderId: nil, previousRiderId: riderId),
            notices
        )
    }

    /// Order confirmed the rider lost the order before pickup (re-assigned or released): they are free again and
    /// told, on their socket or by push.
    func takenAway(from riderId: String, orderId: String, on connection: PostgresConnection) async throws
        -> [RiderNotice]
    {
        guard !(try await store.releaseRider(of: orderId, only: riderId, on: connection)).isEmpty else { return [] }
        return [
            try await tell(
                .unassigned(riderId: riderId, orderId: orderId),
                orElsePush: AllocationRules.unassignedPush(orderId: orderId, riderId: riderId, at: now()),
                on: connection)
        ]
    }

    /// Order refused a rider (an accepted offer or an operator's choice): that rider is freed and told; the order
    /// stays with whoever has it if it was picked up, and ends otherwise.
    func refused(_ refused: RiderAssignmentRefused, on connection: PostgresConnection) async throws -> [RiderNotice] {
        let orderId = refused.orderId
        let freed = try await store.releaseRider(of: orderId, only: refused.riderId, on: connection)
        switch refused.orderStatus {
        // OrderPickedUp came first on orders.events, so this only confirms what it recorded.
        case .status(.inTransit): try await store.markInTransit(orderId, by: nil, on: connection)
        case .status(.delivered): try await store.endAllocation(orderId, status: .completed, on: connection)
        case .status(.pendingVendorAcceptance), .status(.preparing), .status(.readyForPickup), .status(.cancelled),
            .noSuchOrder:
            try await store.endAllocation(orderId, status: .cancelled, on: connection)
        }
        guard !freed.isEmpty else { return [] }
        if refused.orderStatus == .status(.cancelled) {
            return [
                try await tell(
                    .orderCancelled(riderId: refused.riderId, orderId: orderId),
                    orElsePush: AllocationRules.cancellationPush(orderId: orderId, riderId: refused.riderId),
                    on: connection)
            ]
        }
        return [
            try await tell(
                .unassigned(riderId: refused.riderId, orderId: orderId),
                orElsePush: AllocationRules.unassignedPush(orderId: orderId, riderId: refused.riderId, at: now()),
                on: connection)
        ]
    }

    /// The order was picked up: it keeps its rider; an offer still out for it (a release that lost the race with
    /// the pickup) is rescinded.
    func pickedUp(orderId: String, by riderId: String, on connection: PostgresConnection) async throws -> [RiderNotice]
    {
        let notices = try await rescindOffers(ofOrder: orderId, on: connection)
        try await store.markInTransit(orderId, by: riderId, on: connection)
        return notices
    }
}
