import Contracts
import Foundation
import Logging
import PostgresNIO
import RealtimePlatform
import ServiceKit

/// Offers orders to riders: nearest eligible first, one offer per rider and per order at a time (unique
/// indexes), deadlines in the database and decided by `now`. Every method runs inside the caller's transaction
/// and returns what the riders' sockets must be told once it commits. The decisions are ``AllocationRules``'; the
/// SQL is ``AllocationStore``'s.
package struct AllocationWorkflow: Sendable {
    let settings: AllocationSettings
    let outbox: Outbox
    let store: AllocationStore
    /// Riders' live `/rider` sockets (`rider_presence`).
    package let presence: SocketPresence
    let now: Now
    let logger: Logger

    package init(settings: AllocationSettings, outbox: Outbox, now: Now, logger: Logger) {
        self.settings = settings
        self.outbox = outbox
        self.store = AllocationStore(logger: logger)
        self.presence = SocketPresence(RiderPresence.self, freshness: settings.presenceFreshness, logger: logger)
        self.now = now
        self.logger = logger
    }

    // MARK: Orders

    /// Applies an orders.events event: a ready order is offered, a cancelled one rescinded, an ended one releases
    /// its rider.
    package func apply(orderEvent event: DecodedEvent, on connection: PostgresConnection) async throws -> [RiderNotice]
    {
        try await step(forOrderEvent: event)?(connection) ?? []
    }

    /// What an orders.events event does to its allocation, to run in the consumer's transaction; nil for those
    /// allocation does not follow (such as an order created, accepted or assigned, and service requests), which the
    /// consumer skips without a transaction.
    package func step(forOrderEvent event: DecodedEvent) -> EventConsumer.Step<[RiderNotice]>? {
        switch event.payload {
        case let ready as OrderReadyForPickup:
            return { connection in
                try await self.store.insertAllocation(ready, on: connection)
                return try await self.offerNext(orderId: ready.orderId, on: connection)
            }
        case let cancelled as OrderCancelled:
            return { try await self.cancelled(cancelled, on: $0) }
        case let refused as RiderAssignmentRefused:
            return { try await self.refused(refused, on: $0) }
        case let pickedUp as OrderPickedUp:
            return { try await self.pickedUp(orderId: pickedUp.orderId, by: pickedUp.rider.id, on: $0) }
        case let reassigned as RiderReassigned:
            return { try await self.takenAway(from: reassigned.previousRiderId, orderId: reassigned.orderId, on: $0) }
        case let unassigned as RiderUnassigned:
            return { try await self.takenAway(from: unassigned.previousRiderId, orderId: unassigned.orderId, on: $0) }
        case let delivered as OrderDelivered:
            return { connection in
                try await self.release(orderId: delivered.orderId, as: .completed, on: connection)
                return []
            }
        default:
            return nil
        }
    }

    /// Offers the order to the nearest eligible rider, or schedules a retry (AllocationFailed) if there is none.
    func offerNext(orderId: String, on connection: PostgresConnection) async throws -> [RiderNotice] {
        guard let allocation = try await store.lockAllocation(orderId, on: connection),
            allocation.status == .searching || allocation.status == .waiting,
            !(try await store.hasPendingOffer(for: orderId, on: connection))
        else { return [] }
        let now = self.now()
        guard
            let (riderId, toVendorMeters) = try await store.nearestEligibleRider(
                for: orderId, near: allocation.vendor, radiusMeters: settings.radiusMeters,
                freshSince: now - settings.locationMaxAge, on: connection
            )
        else {
            let attempt = allocation.attempts + 1
            let next = now + AllocationRules.retryDelay(afterAttempt: attempt, settings: settings)
            try await store.setAllocation(
                orderId, status: .waiting, attempts: attempt, nextAttemptAt: next, on: connection)
            try await outbox.enqueue(
                AllocationFailed(
                    orderId: orderId, attempt: attempt, reason: AllocationRules.noRiderReason(settings: settings),
                    nextAttemptAt: next),
                aggregateId: orderId, on: connection, logger: logger
            )
            logger.info(
                "no rider for an order; retrying", metadata: ["order.id": "\(orderId)", "attempt": "\(attempt)"])
            return []
        }

        let terms = AllocationRules.terms(
            toVendorMeters: toVendorMeters, toCustomerMeters: allocation.vendor.meters(to: allocation.delivery),
            now: now,
            settings: settings
        )
        let offerId = UUID()
        // A live socket in the foreground is a channel: the app confirms within the receipt window from now. Without
        // one the window starts when the push provider accepts the offer push (``pushOutcome(_:on:)``); if that
        // never comes, the rider is unreachable `OFFER_PUSH_GRACE_SECONDS` after the window would have ended.
        let socketLive = try await presence.isPresent(
            userId: riderId, room: SocketPresence.anywhere, now: now, on: connection)
        try await store.insertOffer(
            offerId, orderId: orderId, riderId: riderId, terms: terms,
            receiptDeadline: socketLive ? terms.receiptDeadline : terms.receiptDeadline + settings.pushGrace,
            awaitingPush: !socketLive, on: connection)
        try await store.markOffered(riderId, on: connection)
        try await store.setAllocation(
            orderId, status: .searching, attempts: allocation.attempts + 1, nextAttemptAt: nil, on: connection)
        let offerIdText = offerId.uuidString.lowercased()
        try await outbox.enqueue(
            OfferSent(offerId: offerIdText, orderId: orderId, riderId: riderId, expiresAt: terms.expiresAt),
            aggregateId: orderId, on: connection, logger: logger
        )
        try await outbox.enqueue(
            AllocationRules.offerPush(
                offerId: offerIdText, orderId: orderId, riderId: riderId, earnings: terms.earnings, settings: settings),
            aggregateId: riderId, on: connection, logger: logger
        )
        let view = OfferView(
            offerId: offerIdText, orderId: orderId,
            vendor: .init(name: allocation.vendorName, address: allocation.vendorAddress),
            deliveryArea: allocation.deliveryArea, distanceKm: terms.distanceKm, tripDistanceKm: terms.tripKm,
            earnings: .init(amount: terms.earnings, currency: "INR"), expiresAt: terms.expiresAt,
            timeoutSeconds: settings.offerTimeoutSeconds, status: .pending
        )
        return [.offer(riderId: riderId, view)]
    }

    // MARK: Offers

    /// The offer `offerId` if it is `riderId`'s, locked; another rider's offer is not found.
    private func lockedOffer(_ offerId: UUID, riderId: String, on connection: PostgresConnection) async throws
        -> OfferRecord
    {
        guard let offer = try await store.lockOffer(offerId, riderId: riderId, on: connection) else {
            throw AllocationRuleViolation.offerNotFound(offerId.uuidString.lowercased())
        }
        return offer
    }

    /// The rider accepts: OfferAccepted; the rider is on a delivery until the order ends.
    package func accept(_ offerId: UUID, rider: PersonRef, on connection: PostgresConnection) async throws -> OfferView
    {
        let offer = try await lockedOffer(offerId, riderId: rider.id, on: connection)
        try AllocationRules.requirePending(offer.status, expiresAt: offer.expiresAt, now: now())
        try await store.decide(offerId, .accepted, on: connection)
        try await store.startDelivery(rider.id, orderId: offer.orderId, on: connection)
        try await store.assign(offer.orderId, riderId: rider.id, on: connection)
        try await outbox.enqueue(
            OfferAccepted(offerId: offerId.uuidString.lowercased(), orderId: offer.orderId, rider: rider),
            aggregateId: offer.orderId, on: connection, logger: logger
        )
        return try await self.offer(offerId, on: connection)
    }

    /// The rider declines: OfferRejected(rejected), and the next rider gets an offer.
    package func reject(_ offerId: UUID, riderId: String, on connection: PostgresConnection) async throws
        -> (OfferView, [RiderNotice])
    {
        let offer = try await lockedOffer(offerId, riderId: riderId, on: connection)
        try AllocationRules.requirePending(offer.status, expiresAt: offer.expiresAt, now: now())
        try await close(
            DueOffer(offerId: offerId, orderId: offer.orderId, riderId: riderId), as: .rejected, riderBecomes: .online,
            on: connection)
        let notices = try await offerNext(orderId: offer.orderId, on: connection)
        return (try await self.offer(offerId, on: connection), notices)
    }

    /// The rider's app confirms it received the offer (so it is not recorded unreachable).
    package func received(_ offerId: UUID, riderId: String, on connection: PostgresConnection) async throws -> OfferView
    {
        _ = try await lockedOffer(offerId, riderId: riderId, on: connection)
        try await store.markReceived(offerId, on: connection)
        return try await offer(offerId, on: connection)
    }

    /// Ends a pending offer with `reason`, frees the rider (`riderBecomes`), and announces OfferRejected.
    func close(
        _ offer: DueOffer, as reason: OfferRejectionReason, riderBecomes riderStatus: RiderStatus,
        offlineReason: OfflineReason? = nil, on connection: PostgresConnection
    ) async throws {
        try await store.close(offer.offerId, OfferStatus(reason), on: connection)
        try await store.freeOfferedRider(offer.riderId, to: riderStatus, reason: offlineReason, on: connection)
        try await outbox.enqueue(
            OfferRejected(
                offerId: offer.offerId.uuidString.lowercased(), orderId: offer.orderId, riderId: offer.riderId,
                reason: reason),
            aggregateId: offer.orderId, on: connection, logger: logger
        )
        logger.info(
            "offer closed",
            metadata: ["offer.id": "\(offer.offerId)", "reason": "\(reason.rawValue)", "order.id": "\(offer.orderId)"])
    }

    package func offer(_ offerId: UUID, on connection: PostgresConnection) async throws -> OfferView {
        guard let offer = try await store.offer(offerId, settings: settings, on: connection) else {
            throw AllocationRuleViolation.offerNotFound(offerId.uuidString.lowercased())
        }
        return offer
    }

    /// The rider's pending offer, if any.
    package func pendingOffer(riderId: String, on connection: PostgresConnection) async throws -> OfferView? {
        guard let offerId = try await store.pendingOfferId(riderId: riderId, now: now(), on: connection) else {
            return nil
        }
        return try await offer(offerId, on: connection)
    }

    // MARK: Deadlines (the scheduler)

    /// One round of the scheduler: offers past their deadline time out, offers never confirmed received are
    /// recorded unreachable, orders that found nobody try again. Survives restarts: the deadlines are rows.
    /// `afterOutage`: this instance's previous round found the database unreachable, or this one waited long for its
    /// connection (see ``resumeAfterOutage(on:)``). The round is recorded on the deadline clock as it ends.
    package func runDeadlines(limit: Int = 100, afterOutage: Bool = false, on connection: PostgresConnection)
        async throws -> [RiderNotice]
    {
        if afterOutage { try await resumeAfterOutage(on: connection) }
        let notices =
            try await expireDue(limit: limit, on: connection)
            + (try await skipUnreachable(limit: limit, on: connection))
            + (try await retryWaiting(limit: limit, on: connection))
            + (try await demoteWithoutFix(limit: limit, on: connection))
        try await store.recordDeadlineRound(at: now(), on: connection)
        return notices
    }

    /// The earliest deadline a round acts on, as the round's transaction sees it; nil when there is none.
    package func nextDeadline(on connection: PostgresConnection) async throws -> Date? {
        try await store.nextDeadline(offlineWithoutFix: settings.offlineWithoutFix, on: connection)
    }

    /// The database was unreachable: no round ran, and no rider's app could confirm an offer. Receipt deadlines
    /// that had not passed at the last round before the outage (on any instance) move by the time since, so a
    /// rider is never recorded unreachable for our outage. The deadline clock is locked first, so of the instances
    /// coming back only the first moves them (the round records itself on the clock before it commits). Answer deadlines stay: the rider's app counts down to them.
    func resumeAfterOutage(on connection: PostgresConnection) async throws {
        let now = self.now()
        guard let lastRound = try await store.lockLastDeadlineRound(on: connection) else { return }
        let outage = now.timeIntervalSince(lastRound)
        guard outage > settings.tick.timeInterval else { return }
        let moved = try await store.postponeReceiptDeadlines(dueAfter: lastRound, bySeconds: outage, on: connection)
        logger.notice(
            "deadline rounds resumed after the database was unreachable; receipt deadlines moved by the outage",
            metadata: ["outage.seconds": "\(outage)", "offers.moved": "\(moved)"])
    }

    /// Online riders without a precise fix for `RIDER_OFFLINE_WITHOUT_FIX_SECONDS` are taken Offline and told
    /// why (BR-RDR-PERM-01: no Online status without precise location).
    func demoteWithoutFix(limit: Int, on connection: PostgresConnection) async throws -> [RiderNotice] {
        let now = self.now()
        var notices: [RiderNotice] = []
        for riderId in try await store.demoteWithoutFix(
            before: now - settings.offlineWithoutFix, limit: limit, on: connection)
        {
            notices.append(try await tookOffline(riderId, because: .noPreciseLocation, on: connection))
        }
        return notices
    }

    /// Tells a rider the system took them Offline: the notice for their sockets, and a push.
    private func tookOffline(_ riderId: String, because reason: OfflineReason, on connection: PostgresConnection)
        async throws -> RiderNotice
    {
        try await outbox.enqueue(
            AllocationRules.offlinePush(riderId: riderId, reason: reason, now: now(), settings: settings),
            aggregateId: riderId, on: connection, logger: logger)
        logger.info("rider taken offline", metadata: ["rider.id": "\(riderId)", "reason": "\(reason.rawValue)"])
        return .wentOffline(riderId: riderId, reason)
    }

    /// Offers past their deadline: timed out (rider online again), next rider offered.
    func expireDue(limit: Int, on connection: PostgresConnection) async throws -> [RiderNotice] {
        var notices: [RiderNotice] = []
        for offer in try await store.expiredOffers(now(), limit: limit, on: connection) {
            try await close(offer, as: .timedOut, riderBecomes: .online, on: connection)
            notices.append(
                .expired(riderId: offer.riderId, offerId: offer.offerId.uuidString.lowercased(), orderId: offer.orderId)
            )
            notices += try await offerNext(orderId: offer.orderId, on: connection)
        }
        return notices
    }

    /// Offers the rider's app never confirmed receiving within the receipt window: recorded unreachable, the
    /// rider taken offline (their device is not listening), the next rider offered.
    func skipUnreachable(limit: Int, on connection: PostgresConnection) async throws -> [RiderNotice] {
        var notices: [RiderNotice] = []
        for offer in try await store.unconfirmedOffers(now(), limit: limit, on: connection) {
            notices += try await unreachable(offer, on: connection)
        }
        return notices
    }

    /// The offer could not reach its rider: recorded unreachable, the rider taken Offline and told, the next rider
    /// offered.
    private func unreachable(_ offer: DueOffer, on connection: PostgresConnection) async throws -> [RiderNotice] {
        try await close(offer, as: .unreachable, riderBecomes: .offline, offlineReason: .unreachable, on: connection)
        return [try await tookOffline(offer.riderId, because: .unreachable, on: connection)]
            + (try await offerNext(orderId: offer.orderId, on: connection))
    }

    /// notifications.events: the offer push's outcome is the evidence for a rider with no live socket. Accepted by
    /// the provider, the receipt window starts as allocation learns it (its own clock, like every deadline here, so
    /// another service's clock skew never shortens it). Undeliverable to any device (none registered, tokens dead),
    /// the rider is unreachable at once, unless a socket came up meanwhile (its window starts then). A failure of
    /// the provider or of our credentials says nothing about the rider: the fallback deadline decides.
    package func pushOutcome(_ event: DecodedEvent, on connection: PostgresConnection) async throws -> [RiderNotice] {
        switch event.payload {
        case let sent as PushSent where sent.kind == .offer:
            guard let orderId = sent.correlationId else { return [] }
            try await store.openReceiptWindow(
                orderId: orderId, riderId: sent.userId, until: now() + settings.receiptTimeout, on: connection)
        case let failed as PushFailed where failed.kind == .offer && failed.isUndeliverableToDevices:
            guard let orderId = failed.correlationId,
                let offer = try await store.offerAwaitingPush(orderId: orderId, riderId: failed.userId, on: connection)
            else { return [] }
            let now = self.now()
            if try await presence.isPresent(
                userId: failed.userId, room: SocketPresence.anywhere, now: now, on: connection)
            {
                try await store.openReceiptWindow(
                    orderId: orderId, riderId: failed.userId, until: now + settings.receiptTimeout, on: connection)
                return []
            }
            logger.info(
                "offer push undeliverable; rider unreachable",
                metadata: ["order.id": "\(orderId)", "rider.id": "\(failed.userId)", "reason": "\(failed.reason)"])
            return try await unreachable(offer, on: connection)
        default:
            break
        }
        return []
    }

    /// Orders that found nobody, due for another round.
    func retryWaiting(limit: Int, on connection: PostgresConnection) async throws -> [RiderNotice] {
        var notices: [RiderNotice] = []
        for orderId in try await store.dueRetries(now(), limit: limit, on: connection) {
            notices += try await offerNext(orderId: orderId, on: connection)
        }
        return notices
    }
}

extension OfferStatus {
    /// The status an offer closed for `reason` ends in.
    init(_ reason: OfferRejectionReason) {
        switch reason {
        case .rejected: self = .rejected
        case .timedOut: self = .timedOut
        case .unreachable: self = .unreachable
        case .rescinded: self = .rescinded
        }
    }
}
