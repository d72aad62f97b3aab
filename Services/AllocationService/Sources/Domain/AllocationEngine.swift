import Contracts
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// Offers orders to riders: nearest eligible first, one offer per rider and per order at a time (unique
/// indexes), deadlines in the database. Every method runs inside the caller's transaction and returns what the
/// riders' sockets must be told once it commits.
package struct AllocationEngine: Sendable {
    let settings: AllocationSettings
    let outbox: Outbox
    let logger: Logger

    package init(settings: AllocationSettings, outbox: Outbox, logger: Logger) {
        self.settings = settings
        self.outbox = outbox
        self.logger = logger
    }

    // MARK: Orders

    /// Applies an orders.events event: a ready order is offered, a cancelled one rescinded, an ended one releases
    /// its rider.
    package func apply(orderEvent event: DecodedEvent, on connection: PostgresConnection) async throws -> [RiderNotice] {
        switch event.payload {
        case let ready as OrderReadyForPickup:
            return try await start(ready, on: connection)
        case let cancelled as OrderCancelled:
            return try await self.cancelled(orderId: cancelled.orderId, on: connection)
        case let refused as RiderAssignmentRefused:
            try await release(orderId: refused.orderId, allocationStatus: "cancelled", on: connection)
        case let delivered as OrderDelivered:
            try await release(orderId: delivered.orderId, allocationStatus: "completed", on: connection)
        default:
            break
        }
        return []
    }

    /// An order became ready: remember it and offer it.
    package func start(_ ready: OrderReadyForPickup, on connection: PostgresConnection) async throws -> [RiderNotice] {
        let vendor = ready.vendor
        try await connection.query(
            """
            INSERT INTO allocations (order_id, customer_id, vendor_name, vendor_address, vendor_lat, vendor_lng, delivery_area,
                                     delivery_lat, delivery_lng, status)
            VALUES (\(ready.orderId), \(ready.customerId), \(vendor.name), \(vendor.address.line1 + ", " + vendor.address.area),
                    \(vendor.address.lat), \(vendor.address.lng), \(ready.deliveryArea), \(ready.deliveryLocation.lat),
                    \(ready.deliveryLocation.lng), 'searching')
            ON CONFLICT (order_id) DO NOTHING
            """, logger: logger
        )
        return try await offerNext(orderId: ready.orderId, on: connection)
    }

    /// Offers the order to the nearest eligible rider, or schedules a retry (AllocationFailed) if there is none.
    package func offerNext(orderId: String, on connection: PostgresConnection) async throws -> [RiderNotice] {
        let rows = try await connection.query(
            """
            SELECT vendor_name, vendor_address, vendor_lat, vendor_lng, delivery_area, delivery_lat, delivery_lng,
                   status, attempts
            FROM allocations WHERE order_id = \(orderId) FOR UPDATE
            """, logger: logger
        )
        var found: (String, String, Double, Double, String, Double, Double, String, Int)?
        for try await row in rows.decode((String, String, Double, Double, String, Double, Double, String, Int).self) { found = row }
        guard let (vendorName, vendorAddress, vendorLat, vendorLng, area, deliveryLat, deliveryLng, status, attempts) = found,
            status == "searching" || status == "waiting"
        else { return [] }
        let pending = try await connection.query(
            "SELECT 1 FROM offers WHERE order_id = \(orderId) AND status = 'pending'", logger: logger
        )
        for try await _ in pending { return [] }

        let freshSince = Date().addingTimeInterval(-Double(settings.locationMaxAge.components.seconds))
        // The nearest online rider by the KNN index, within a cube around the vendor that holds the radius.
        let candidates = try await connection.query(
            """
            SELECT r.rider_id, r.lat, r.lng
            FROM riders r
            WHERE r.status = 'online' AND r.location_recorded_at > \(freshSince)
              AND public.cube_enlarge(sphere_point(\(vendorLat), \(vendorLng)), \(Self.chord(meters: settings.radiusMeters)), 3)
                  OPERATOR(public.@>) sphere_point(r.lat, r.lng)
              AND NOT EXISTS (SELECT 1 FROM offers o WHERE o.order_id = \(orderId) AND o.rider_id = r.rider_id)
            ORDER BY sphere_point(r.lat, r.lng) OPERATOR(public.<->) sphere_point(\(vendorLat), \(vendorLng))
            LIMIT 1
            FOR UPDATE OF r SKIP LOCKED
            """, logger: logger
        )
        var chosen: (String, Double)?
        for try await (riderId, lat, lng) in candidates.decode((String, Double, Double).self) {
            let meters = GeoPoint(lat: lat, lng: lng).meters(to: GeoPoint(lat: vendorLat, lng: vendorLng))
            if meters <= settings.radiusMeters { chosen = (riderId, meters) }
        }

        guard let (riderId, toVendorMeters) = chosen else {
            let attempt = attempts + 1
            let delay = min(settings.retryInitial * (1 << min(attempt - 1, 16)), settings.retryMaximum)
            let next = Date().addingTimeInterval(Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18)
            try await connection.query(
                "UPDATE allocations SET status = 'waiting', attempts = \(attempt), next_attempt_at = \(next) WHERE order_id = \(orderId)",
                logger: logger
            )
            try await outbox.enqueue(
                AllocationFailed(orderId: orderId, attempt: attempt, reason: "no eligible rider within \(settings.radiusMeters / 1000) km", nextAttemptAt: next),
                aggregateId: orderId, on: connection, logger: logger
            )
            logger.info("no rider for an order; retrying", metadata: ["order.id": "\(orderId)", "attempt": "\(attempt)"])
            return []
        }

        let toCustomerMeters = GeoPoint(lat: vendorLat, lng: vendorLng).meters(to: GeoPoint(lat: deliveryLat, lng: deliveryLng))
        let tripKilometres = (toVendorMeters + toCustomerMeters) / 1000
        let now = Date()
        let offerId = UUID()
        let expiresAt = now.addingTimeInterval(Double(settings.offerTimeout.components.seconds))
        let receiptDeadline = now.addingTimeInterval(Double(settings.receiptTimeout.components.seconds))
        let earnings = AllocationSettings.earnings(tripKilometres: tripKilometres)
        let distanceKm = (toVendorMeters / 100).rounded() / 10
        let tripKm = (tripKilometres * 10).rounded() / 10
        try await connection.query(
            """
            INSERT INTO offers (offer_id, order_id, rider_id, status, distance_km, trip_km, earnings, expires_at, receipt_deadline)
            VALUES (\(offerId), \(orderId), \(riderId), 'pending', \(distanceKm), \(tripKm), \(earnings), \(expiresAt), \(receiptDeadline))
            """, logger: logger
        )
        try await connection.query("UPDATE riders SET status = 'offered', updated_at = now() WHERE rider_id = \(riderId)", logger: logger)
        try await connection.query(
            "UPDATE allocations SET status = 'searching', attempts = \(attempts + 1), next_attempt_at = NULL WHERE order_id = \(orderId)",
            logger: logger
        )
        let offerIdText = offerId.uuidString.lowercased()
        try await outbox.enqueue(
            OfferSent(offerId: offerIdText, orderId: orderId, riderId: riderId, expiresAt: expiresAt), aggregateId: orderId, on: connection,
            logger: logger
        )
        let timeout = Int(settings.offerTimeout.components.seconds)
        try await outbox.enqueue(
            PushRequested(
                notificationId: "offer-\(offerIdText)", userId: riderId, kind: "offer", title: "New delivery offer",
                body: "New delivery offer! Earn an estimated ₹\(earnings).",
                data: ["link": "app://offers/\(offerIdText)", "offerId": offerIdText, "orderId": orderId], priority: .high,
                collapseKey: "offer-\(offerIdText)", ttlSeconds: timeout, sound: "offer_alert", correlationId: orderId
            ),
            aggregateId: riderId, on: connection, logger: logger
        )
        let view = OfferView(
            offerId: offerIdText, orderId: orderId, vendor: .init(name: vendorName, address: vendorAddress), deliveryArea: area,
            distanceKm: distanceKm, tripDistanceKm: tripKm, earnings: .init(amount: earnings, currency: "INR"), expiresAt: expiresAt,
            timeoutSeconds: timeout, status: "pending"
        )
        return [.offer(riderId: riderId, view)]
    }

    /// The straight-line distance between two points of the unit sphere `meters` apart along its surface.
    static func chord(meters: Double) -> Double { 2 * sin(meters / (2 * GeoPoint.earthRadiusMeters)) }

    // MARK: Offers

    /// The offer `offerId` if it is `riderId`'s, locked; 404 otherwise (another rider's offer is not found).
    func lockedOffer(_ offerId: UUID, riderId: String, on connection: PostgresConnection) async throws
        -> (orderId: String, status: String, expiresAt: Date)
    {
        let rows = try await connection.query(
            "SELECT order_id, status, expires_at FROM offers WHERE offer_id = \(offerId) AND rider_id = \(riderId) FOR UPDATE",
            logger: logger
        )
        for try await row in rows.decode((String, String, Date).self) { return row }
        throw APIError.notFound("no offer \(offerId.uuidString.lowercased()) for you")
    }

    /// The rider accepts: OfferAccepted; the rider is on a delivery until the order ends.
    package func accept(_ offerId: UUID, rider: PersonRef, on connection: PostgresConnection) async throws -> OfferView {
        let (orderId, status, expiresAt) = try await lockedOffer(offerId, riderId: rider.id, on: connection)
        try Self.requirePending(status: status, expiresAt: expiresAt)
        try await connection.query(
            "UPDATE offers SET status = 'accepted', decided_at = now(), received_at = coalesce(received_at, now()) WHERE offer_id = \(offerId)",
            logger: logger
        )
        try await connection.query(
            "UPDATE riders SET status = 'delivering', current_order_id = \(orderId), updated_at = now() WHERE rider_id = \(rider.id)",
            logger: logger
        )
        try await connection.query(
            "UPDATE allocations SET status = 'assigned', rider_id = \(rider.id) WHERE order_id = \(orderId)", logger: logger
        )
        try await outbox.enqueue(
            OfferAccepted(offerId: offerId.uuidString.lowercased(), orderId: orderId, rider: rider), aggregateId: orderId,
            on: connection, logger: logger
        )
        return try await offer(offerId, on: connection)
    }

    /// The rider declines: OfferRejected(rejected), and the next rider gets an offer.
    package func reject(_ offerId: UUID, riderId: String, on connection: PostgresConnection) async throws -> (OfferView, [RiderNotice]) {
        let (orderId, status, expiresAt) = try await lockedOffer(offerId, riderId: riderId, on: connection)
        try Self.requirePending(status: status, expiresAt: expiresAt)
        try await close(offerId, orderId: orderId, riderId: riderId, reason: .rejected, riderStatus: "online", on: connection)
        let notices = try await offerNext(orderId: orderId, on: connection)
        return (try await offer(offerId, on: connection), notices)
    }

    /// The rider's app confirms it received the offer (so it is not recorded unreachable).
    package func received(_ offerId: UUID, riderId: String, on connection: PostgresConnection) async throws -> OfferView {
        _ = try await lockedOffer(offerId, riderId: riderId, on: connection)
        try await connection.query(
            "UPDATE offers SET received_at = coalesce(received_at, now()) WHERE offer_id = \(offerId)", logger: logger
        )
        return try await offer(offerId, on: connection)
    }

    private static func requirePending(status: String, expiresAt: Date) throws {
        switch status {
        case "pending" where expiresAt > Date(): return
        case "pending", "timed_out", "unreachable": throw APIError.conflict(.offerExpired, "the offer expired")
        case "rescinded": throw APIError.conflict(.offerRescinded, "This offer is no longer available")
        default: throw APIError.conflict(.offerNotPending, "the offer was already \(status)", details: ["status": status])
        }
    }

    /// Ends a pending offer with `reason`, frees the rider (`riderStatus`), and announces OfferRejected.
    private func close(
        _ offerId: UUID, orderId: String, riderId: String, reason: OfferRejectionReason, riderStatus: String,
        on connection: PostgresConnection
    ) async throws {
        try await connection.query(
            "UPDATE offers SET status = \(reason.rawValue), decided_at = now() WHERE offer_id = \(offerId) AND status = 'pending'",
            logger: logger
        )
        try await connection.query(
            "UPDATE riders SET status = \(riderStatus), updated_at = now() WHERE rider_id = \(riderId) AND status = 'offered'",
            logger: logger
        )
        try await outbox.enqueue(
            OfferRejected(offerId: offerId.uuidString.lowercased(), orderId: orderId, riderId: riderId, reason: reason),
            aggregateId: orderId, on: connection, logger: logger
        )
        logger.info("offer closed", metadata: ["offer.id": "\(offerId)", "reason": "\(reason.rawValue)", "order.id": "\(orderId)"])
    }

    package func offer(_ offerId: UUID, on connection: PostgresConnection) async throws -> OfferView {
        let rows = try await connection.query(
            """
            SELECT o.offer_id, o.order_id, a.vendor_name, a.vendor_address, a.delivery_area, o.distance_km, o.trip_km, o.earnings,
                   o.expires_at, o.status
            FROM offers o JOIN allocations a ON a.order_id = o.order_id WHERE o.offer_id = \(offerId)
            """, logger: logger
        )
        for try await (id, orderId, vendorName, vendorAddress, area, distance, trip, earnings, expiresAt, status)
            in rows.decode((UUID, String, String, String, String, Double, Double?, Decimal, Date, String).self)
        {
            return OfferView(
                offerId: id.uuidString.lowercased(), orderId: orderId, vendor: .init(name: vendorName, address: vendorAddress),
                deliveryArea: area, distanceKm: distance, tripDistanceKm: trip, earnings: .init(amount: earnings, currency: "INR"),
                expiresAt: expiresAt, timeoutSeconds: Int(settings.offerTimeout.components.seconds), status: status
            )
        }
        throw APIError.notFound("no offer \(offerId)")
    }

    /// The rider's pending offer, if any.
    package func pendingOffer(riderId: String, on connection: PostgresConnection) async throws -> OfferView? {
        let rows = try await connection.query(
            "SELECT offer_id FROM offers WHERE rider_id = \(riderId) AND status = 'pending' AND expires_at > now()", logger: logger
        )
        for try await id in rows.decode(UUID.self) { return try await offer(id, on: connection) }
        return nil
    }

    // MARK: Deadlines (the scheduler)

    /// Offers past their deadline: timed out (rider online again), next rider offered. Survives restarts: the
    /// deadlines are rows.
    package func expireDue(limit: Int = 100, on connection: PostgresConnection) async throws -> [RiderNotice] {
        let due = try await lockedOffers(
            """
            SELECT offer_id, order_id, rider_id FROM offers WHERE status = 'pending' AND expires_at <= now()
            ORDER BY expires_at LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """, on: connection
        )
        var notices: [RiderNotice] = []
        for (offerId, orderId, riderId) in due {
            try await close(offerId, orderId: orderId, riderId: riderId, reason: .timedOut, riderStatus: "online", on: connection)
            notices.append(.expired(riderId: riderId, offerId: offerId.uuidString.lowercased(), orderId: orderId))
            notices += try await offerNext(orderId: orderId, on: connection)
        }
        return notices
    }

    /// Offers the rider's app never confirmed receiving within the receipt window: recorded unreachable, the
    /// rider taken offline (their device is not listening), the next rider offered.
    package func skipUnreachable(limit: Int = 100, on connection: PostgresConnection) async throws -> [RiderNotice] {
        let due = try await lockedOffers(
            """
            SELECT offer_id, order_id, rider_id FROM offers
            WHERE status = 'pending' AND received_at IS NULL AND receipt_deadline <= now()
            ORDER BY receipt_deadline LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """, on: connection
        )
        var notices: [RiderNotice] = []
        for (offerId, orderId, riderId) in due {
            try await close(offerId, orderId: orderId, riderId: riderId, reason: .unreachable, riderStatus: "offline", on: connection)
            notices += try await offerNext(orderId: orderId, on: connection)
        }
        return notices
    }

    /// The (offer, order, rider) rows `query` selects and locks.
    private func lockedOffers(_ query: PostgresQuery, on connection: PostgresConnection) async throws -> [(UUID, String, String)] {
        var offers: [(UUID, String, String)] = []
        for try await row in try await connection.query(query, logger: logger).decode((UUID, String, String).self) { offers.append(row) }
        return offers
    }

    /// Orders that found nobody, due for another round.
    package func retryWaiting(limit: Int = 100, on connection: PostgresConnection) async throws -> [RiderNotice] {
        let rows = try await connection.query(
            """
            SELECT order_id FROM allocations WHERE status = 'waiting' AND next_attempt_at <= now()
            ORDER BY next_attempt_at LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """, logger: logger
        )
        var due: [String] = []
        for try await orderId in rows.decode(String.self) { due.append(orderId) }
        var notices: [RiderNotice] = []
        for orderId in due { notices += try await offerNext(orderId: orderId, on: connection) }
        return notices
    }

    // MARK: The order's fate

    /// The order was cancelled: a pending offer is rescinded, an assigned rider released.
    package func cancelled(orderId: String, on connection: PostgresConnection) async throws -> [RiderNotice] {
        var notices: [RiderNotice] = []
        let rows = try await connection.query(
            "SELECT offer_id, rider_id FROM offers WHERE order_id = \(orderId) AND status = 'pending' FOR UPDATE", logger: logger
        )
        for try await (offerId, riderId) in rows.decode((UUID, String).self) {
            try await close(offerId, orderId: orderId, riderId: riderId, reason: .rescinded, riderStatus: "online", on: connection)
            notices.append(.rescinded(riderId: riderId, offerId: offerId.uuidString.lowercased(), orderId: orderId))
        }
        try await release(orderId: orderId, allocationStatus: "cancelled", on: connection)
        return notices
    }

    /// The order ended (delivered, or refused the rider): the rider is free again.
    package func release(orderId: String, allocationStatus: String, on connection: PostgresConnection) async throws {
        try await connection.query(
            """
            UPDATE riders SET status = 'online', current_order_id = NULL, updated_at = now()
            WHERE current_order_id = \(orderId) AND status = 'delivering'
            """, logger: logger
        )
        try await connection.query(
            "UPDATE allocations SET status = \(allocationStatus), next_attempt_at = NULL WHERE order_id = \(orderId)", logger: logger
        )
    }

    // MARK: Riders

    /// The rider goes online (with a precise, fresh fix) or offline. A pending offer is declined by going offline.
    package func setAvailability(
        rider: PersonRef, online: Bool, location: RiderLocation?, on connection: PostgresConnection
    ) async throws -> (RiderView, [RiderNotice]) {
        let current = try await self.rider(rider.id, forUpdate: true, on: connection)
        if current?.status == "delivering" {
            throw APIError.conflict(.riderOnDelivery, "finish the current delivery first", details: ["orderId": current?.currentOrderId ?? ""])
        }
        var notices: [RiderNotice] = []
        if online {
            guard let location, location.accuracyMeters <= settings.preciseAccuracyMeters,
                Date().timeIntervalSince(location.recordedAt) <= Double(settings.locationMaxAge.components.seconds),
                location.recordedAt.timeIntervalSinceNow < 60
            else {
                throw APIError.unprocessable(
                    .preciseLocationRequired,
                    "going online needs a precise location (accuracy within \(Int(settings.preciseAccuracyMeters)) m, at most \(settings.locationMaxAge.components.seconds) s old)"
                )
            }
            try Validate.coordinates(lat: location.lat, lng: location.lng, "location")
            try await connection.query(
                """
                INSERT INTO riders (rider_id, name, status, lat, lng, accuracy_meters, location_recorded_at)
                VALUES (\(rider.id), \(rider.name), 'online', \(location.lat), \(location.lng), \(location.accuracyMeters), \(location.recordedAt))
                ON CONFLICT (rider_id) DO UPDATE SET name = excluded.name,
                    status = CASE WHEN riders.status = 'offered' THEN 'offered' ELSE 'online' END,
                    lat = excluded.lat, lng = excluded.lng, accuracy_meters = excluded.accuracy_meters,
                    location_recorded_at = excluded.location_recorded_at, updated_at = now()
                """, logger: logger
            )
            // Someone new is online: orders waiting for a rider try again now.
            try await connection.query(
                "UPDATE allocations SET next_attempt_at = now() WHERE status = 'waiting' AND next_attempt_at > now()", logger: logger
            )
        } else {
            if current?.status == "offered" {
                let rows = try await connection.query(
                    "SELECT offer_id, order_id FROM offers WHERE rider_id = \(rider.id) AND status = 'pending' FOR UPDATE", logger: logger
                )
                for try await (offerId, orderId) in rows.decode((UUID, String).self) {
                    try await close(offerId, orderId: orderId, riderId: rider.id, reason: .rejected, riderStatus: "offline", on: connection)
                    notices += try await offerNext(orderId: orderId, on: connection)
                }
            }
            try await connection.query(
                """
                INSERT INTO riders (rider_id, name, status) VALUES (\(rider.id), \(rider.name), 'offline')
                ON CONFLICT (rider_id) DO UPDATE SET status = 'offline', updated_at = now()
                """, logger: logger
            )
        }
        return (try await self.rider(rider.id, on: connection)!, notices)
    }

    package func rider(_ riderId: String, forUpdate: Bool = false, on connection: PostgresConnection) async throws -> RiderView? {
        var query: PostgresQuery = """
            SELECT rider_id, status, lat, lng, accuracy_meters, location_recorded_at, current_order_id FROM riders WHERE rider_id = \(riderId)
            """
        if forUpdate { query.sql += " FOR UPDATE" }
        let rows = try await connection.query(query, logger: logger)
        for try await (id, status, lat, lng, accuracy, recordedAt, orderId)
            in rows.decode((String, String, Double?, Double?, Double?, Date?, String?).self)
        {
            var location: RiderLocation?
            if let lat, let lng, let accuracy, let recordedAt {
                location = RiderLocation(lat: lat, lng: lng, accuracyMeters: accuracy, recordedAt: recordedAt)
            }
            return RiderView(riderId: id, status: status, location: location, currentOrderId: orderId)
        }
        return nil
    }

    /// A newer position from Location (couriers.positions) moves the rider.
    package func moved(_ position: PositionUpdated, on connection: PostgresConnection) async throws {
        guard position.role == .rider else { return }
        try await connection.query(
            """
            UPDATE riders SET lat = \(position.lat), lng = \(position.lng), accuracy_meters = \(position.accuracyMeters),
                   location_recorded_at = \(position.recordedAt), updated_at = now()
            WHERE rider_id = \(position.courierId) AND (location_recorded_at IS NULL OR location_recorded_at < \(position.recordedAt))
            """, logger: logger
        )
    }
}
