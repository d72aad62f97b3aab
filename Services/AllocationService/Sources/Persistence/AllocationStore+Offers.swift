import Foundation
import PostgresNIO

/// The offers table.
extension AllocationStore {
    func hasPendingOffer(for orderId: String, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.queryWhileOpen(
            "SELECT 1 FROM offers WHERE order_id = \(orderId) AND status = \(OfferStatus.pending)", logger: logger
        )
        for try await _ in rows { return true }
        return false
    }

    /// A new pending offer; `awaitingPush` when only its push can reach the rider (the deadline is then a fallback
    /// until the push's outcome is known).
    func insertOffer(
        _ offerId: UUID, orderId: String, riderId: String, terms: OfferTerms, receiptDeadline: Date,
        awaitingPush: Bool, on connection: PostgresConnection
    ) async throws {
        try await connection.queryWhileOpen(
            """
            INSERT INTO offers (offer_id, order_id, rider_id, status, distance_km, trip_km, earnings, expires_at,
                                receipt_deadline, awaiting_push)
            VALUES (\(offerId), \(orderId), \(riderId), \(OfferStatus.pending), \(terms.distanceKm), \(terms.tripKm),
                    \(terms.earnings), \(terms.expiresAt), \(receiptDeadline), \(awaitingPush))
            """, logger: logger
        )
    }

    /// The offer `offerId` if it is `riderId`'s, locked.
    func lockOffer(_ offerId: UUID, riderId: String, on connection: PostgresConnection) async throws -> OfferRecord? {
        let rows = try await connection.queryWhileOpen(
            "SELECT order_id, status, expires_at FROM offers WHERE offer_id = \(offerId) AND rider_id = \(riderId) FOR UPDATE",
            logger: logger
        )
        for try await (orderId, status, expiresAt) in rows.decode((String, OfferStatus, Date).self) {
            return OfferRecord(orderId: orderId, status: status, expiresAt: expiresAt)
        }
        return nil
    }

    /// Records the rider's answer (the answer implies the offer was received).
    func decide(_ offerId: UUID, _ status: OfferStatus, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            UPDATE offers SET status = \(status), decided_at = now(), received_at = coalesce(received_at, now())
            WHERE offer_id = \(offerId)
            """, logger: logger
        )
    }

    /// Ends a still pending offer with `status` (the rider did not answer it).
    func close(_ offerId: UUID, _ status: OfferStatus, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            UPDATE offers SET status = \(status), decided_at = now()
            WHERE offer_id = \(offerId) AND status = \(OfferStatus.pending)
            """, logger: logger
        )
    }

    func markReceived(_ offerId: UUID, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            "UPDATE offers SET received_at = coalesce(received_at, now()) WHERE offer_id = \(offerId)", logger: logger
        )
    }

    func offer(_ offerId: UUID, settings: AllocationSettings, on connection: PostgresConnection) async throws
        -> OfferView?
    {
        let rows = try await connection.queryWhileOpen(
            """
            SELECT o.offer_id, o.order_id, a.vendor_name, a.vendor_address, a.delivery_area, o.distance_km, o.trip_km,
                   o.earnings, o.expires_at, o.status
            FROM offers o JOIN allocations a ON a.order_id = o.order_id WHERE o.offer_id = \(offerId)
            """, logger: logger
        )
        for try await (id, orderId, vendorName, vendorAddress, area, distance, trip, earnings, expiresAt, status)
            in rows.decode((UUID, String, String, String, String, Double, Double?, Decimal, Date, OfferStatus).self)
        {
            return OfferView(
                offerId: id.uuidString.lowercased(), orderId: orderId,
                vendor: .init(name: vendorName, address: vendorAddress), deliveryArea: area, distanceKm: distance,
                tripDistanceKm: trip, earnings: .init(amount: earnings, currency: "INR"), expiresAt: expiresAt,
                timeoutSeconds: settings.offerTimeoutSeconds, status: status
            )
        }
        return nil
    }

    /// The rider's offer that is pending and not past its deadline at `now`.
    func pendingOfferId(riderId: String, now: Date, on connection: PostgresConnection) async throws -> UUID? {
        let rows = try await connection.queryWhileOpen(
            """
            SELECT offer_id FROM offers
            WHERE rider_id = \(riderId) AND status = \(OfferStatus.pending) AND expires_at > \(now)
            """, logger: logger
        )
        for try await id in rows.decode(UUID.self) { return id }
        return nil
    }

    /// Pending offers past their answer deadline at `now`, locked.
    func expiredOffers(_ now: Date, limit: Int, on connection: PostgresConnection) async throws -> [DueOffer] {
        try await dueOffers(
            """
            SELECT offer_id, order_id, rider_id FROM offers WHERE status = \(OfferStatus.pending) AND expires_at <= \(now)
            ORDER BY expires_at LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """, on: connection
        )
    }

    /// Pending offers the rider's app did not confirm receiving by their receipt deadline at `now`, locked.
    func unconfirmedOffers(_ now: Date, limit: Int, on connection: PostgresConnection) async throws -> [DueOffer] {
        try await dueOffers(
            """
            SELECT offer_id, order_id, rider_id FROM offers
            WHERE status = \(OfferStatus.pending) AND received_at IS NULL AND receipt_deadline <= \(now)
            ORDER BY receipt_deadline LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """, on: connection
        )
    }

    /// The earliest of every deadline a round acts on (answer, receipt, retry, an Online rider's fix running out
    /// after `offlineWithoutFix`); nil when there is none.
    func nextDeadline(offlineWithoutFix: Duration, on connection: PostgresConnection) async throws -> Date? {
        let rows = try await connection.queryWhileOpen(
            """
            SELECT least(
                (SELECT min(expires_at) FROM offers WHERE status = \(OfferStatus.pending)),
                (SELECT min(receipt_deadline) FROM offers WHERE status = \(OfferStatus.pending) AND received_at IS NULL),
                (SELECT min(next_attempt_at) FROM allocations WHERE status = \(AllocationStatus.waiting)),
                (SELECT min(coalesce(location_recorded_at, 'epoch')) FROM riders WHERE status = \(RiderStatus.online))
                    + \(offlineWithoutFix.timeInterval) * interval '1 second')
            """, logger: logger
        )
        for try await deadline in rows.decode(Date?.self) { return deadline }
        return nil
    }

    /// Records a deadline round at `now` on the deadline clock (which only moves forward).
    func recordDeadlineRound(at now: Date, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            INSERT INTO deadline_clock (last_round_at) VALUES (\(now))
            ON CONFLICT (singleton) DO UPDATE SET last_round_at = greatest(deadline_clock.last_round_at, \(now))
            """, logger: logger
        )
    }

    /// When a deadline round last ran on any instance, locked until the transaction ends; nil before the first.
    func lockLastDeadlineRound(on connection: PostgresConnection) async throws -> Date? {
        let rows = try await connection.queryWhileOpen(
            "SELECT last_round_at FROM deadline_clock FOR UPDATE", logger: logger)
        for try await lastRound in rows.decode(Date.self) { return lastRound }
        return nil
    }

    /// Moves the receipt deadlines of pending offers not yet confirmed, due after `since`, by `seconds`; returns
    /// how many moved.
    func postponeReceiptDeadlines(dueAfter since: Date, bySeconds seconds: Double, on connection: PostgresConnection)
        async throws -> Int
    {
        let rows = try await connection.queryWhileOpen(
            """
            WITH moved AS (
                UPDATE offers SET receipt_deadline = receipt_deadline + \(seconds) * interval '1 second'
                WHERE status = \(OfferStatus.pending) AND received_at IS NULL AND receipt_deadline > \(since)
                RETURNING 1
            )
            SELECT count(*)::int FROM moved
            """, logger: logger
        )
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// The receipt window of `riderId`'s pending offer of `orderId`, still awaiting its push's outcome, starts now:
    /// the app must confirm by `deadline`.
    func openReceiptWindow(orderId: String, riderId: String, until deadline: Date, on connection: PostgresConnection)
        async throws
    {
        try await connection.queryWhileOpen(
            """
            UPDATE offers SET receipt_deadline = \(deadline), awaiting_push = false
            WHERE order_id = \(orderId) AND rider_id = \(riderId) AND status = \(OfferStatus.pending)
              AND received_at IS NULL AND awaiting_push
            """, logger: logger
        )
    }

    /// `riderId`'s pending offer of `orderId`, locked, if it still awaits its push's outcome (no live socket when it
    /// was made) and the app has not confirmed it.
    func offerAwaitingPush(orderId: String, riderId: String, on connection: PostgresConnection) async throws
        -> DueOffer?
    {
        try await dueOffers(
            """
            SELECT offer_id, order_id, rider_id FROM offers
            WHERE order_id = \(orderId) AND rider_id = \(riderId) AND status = \(OfferStatus.pending)
              AND received_at IS NULL AND awaiting_push
            FOR UPDATE
            """, on: connection
        ).first
    }

    /// The pending offers of an order, locked.
    func pendingOffers(ofOrder orderId: String, on connection: PostgresConnection) async throws -> [DueOffer] {
        try await dueOffers(
            """
            SELECT offer_id, order_id, rider_id FROM offers
            WHERE order_id = \(orderId) AND status = \(OfferStatus.pending) FOR UPDATE
            """, on: connection
        )
    }

    /// The pending offers of a rider, locked.
    func pendingOffers(ofRider riderId: String, on connection: PostgresConnection) async throws -> [DueOffer] {
        try await dueOffers(
            """
            SELECT offer_id, order_id, rider_id FROM offers
            WHERE rider_id = \(riderId) AND status = \(OfferStatus.pending) FOR UPDATE
            """, on: connection
        )
    }

    private func dueOffers(_ query: PostgresQuery, on connection: PostgresConnection) async throws -> [DueOffer] {
        var offers: [DueOffer] = []
        for try await (offerId, orderId, riderId) in try await connection.queryWhileOpen(query, logger: logger)
            .decode((UUID, String, String).self)
        {
            offers.append(DueOffer(offerId: offerId, orderId: orderId, riderId: riderId))
        }
        return offers
    }
}
