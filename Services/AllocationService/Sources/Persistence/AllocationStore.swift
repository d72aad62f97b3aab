import Contracts
import Foundation
import Logging
import PostgresNIO
import RealtimePlatform
import ServiceKit

extension OfferStatus: PostgresTextEnum {}
extension RiderStatus: PostgresTextEnum {}
extension AllocationStatus: PostgresTextEnum {}
extension OfflineReason: PostgresTextEnum {}

/// An order being allocated, as stored.
struct AllocationRecord: Sendable {
    var vendorName: String
    var vendorAddress: String
    var vendor: GeoPoint
    var deliveryArea: String
    var delivery: GeoPoint
    var status: AllocationStatus
    var attempts: Int
    /// The rider allocation gave the order to (an accepted offer or an operator's choice).
    var riderId: String?
}

/// Allocation's SQL: orders being allocated, riders, offers. Every method runs on the caller's connection (in
/// its transaction); times come from the caller, so deadlines are decided by one clock.
struct AllocationStore: Sendable {
    let logger: Logger

    // MARK: Allocations

    func insertAllocation(_ ready: OrderReadyForPickup, on connection: PostgresConnection) async throws {
        let vendor = ready.vendor
        try await connection.queryWhileOpen(
            """
            INSERT INTO allocations (order_id, customer_id, vendor_name, vendor_address, vendor_lat, vendor_lng,
                                     delivery_area, delivery_lat, delivery_lng, status)
            VALUES (\(ready.orderId), \(ready.customerId), \(vendor.name), \(vendor.address.line1 + ", " + vendor.address.area),
                    \(vendor.address.lat), \(vendor.address.lng), \(ready.deliveryArea), \(ready.deliveryLocation.lat),
                    \(ready.deliveryLocation.lng), \(AllocationStatus.searching))
            ON CONFLICT (order_id) DO NOTHING
            """, logger: logger
        )
    }

    /// The order's allocation, locked unless `forUpdate` is false.
    func lockAllocation(_ orderId: String, forUpdate: Bool = true, on connection: PostgresConnection) async throws
        -> AllocationRecord?
    {
        var query: PostgresQuery = """
            SELECT vendor_name, vendor_address, vendor_lat, vendor_lng, delivery_area, delivery_lat, delivery_lng,
                   status, attempts, rider_id
            FROM allocations WHERE order_id = \(orderId)
            """
        if forUpdate { query.sql += " FOR UPDATE" }
        let rows = try await connection.queryWhileOpen(query, logger: logger)
        for try await (name, address, vendorLat, vendorLng, area, deliveryLat, deliveryLng, status, attempts, riderId)
            in rows.decode(
                (String, String, Double, Double, String, Double, Double, AllocationStatus, Int, String?).self)
        {
            return AllocationRecord(
                vendorName: name, vendorAddress: address, vendor: GeoPoint(lat: vendorLat, lng: vendorLng),
                deliveryArea: area, delivery: GeoPoint(lat: deliveryLat, lng: deliveryLng), status: status,
                attempts: attempts, riderId: riderId
            )
        }
        return nil
    }

    func setAllocation(
        _ orderId: String, status: AllocationStatus, attempts: Int, nextAttemptAt: Date?,
        on connection: PostgresConnection
    ) async throws {
        try await connection.queryWhileOpen(
            """
            UPDATE allocations SET status = \(status), attempts = \(attempts), next_attempt_at = \(nextAttemptAt)
            WHERE order_id = \(orderId)
            """, logger: logger
        )
    }

    func assign(_ orderId: String, riderId: String, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            "UPDATE allocations SET status = \(AllocationStatus.assigned), rider_id = \(riderId) WHERE order_id = \(orderId)",
            logger: logger
        )
    }

    /// Records who holds the order now (nil: nobody, allocation searches again) and where it stands.
    func setRider(_ orderId: String, riderId: String?, status: AllocationStatus, on connection: PostgresConnection)
        async throws
    {
        try await connection.queryWhileOpen(
            """
            UPDATE allocations SET status = \(status), rider_id = \(riderId), next_attempt_at = NULL
            WHERE order_id = \(orderId)
            """, logger: logger
        )
    }

    /// The order was picked up (by `riderId`, when known): it can no longer change rider.
    func markInTransit(_ orderId: String, by riderId: String?, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            UPDATE allocations SET status = \(AllocationStatus.inTransit), next_attempt_at = NULL,
                   rider_id = coalesce(\(riderId), rider_id)
            WHERE order_id = \(orderId)
              AND status IN (\(AllocationStatus.searching), \(AllocationStatus.waiting), \(AllocationStatus.assigned))
            """, logger: logger
        )
    }

    func endAllocation(_ orderId: String, status: AllocationStatus, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            "UPDATE allocations SET status = \(status), next_attempt_at = NULL WHERE order_id = \(orderId)",
            logger: logger
        )
    }

    /// Orders waiting for a rider are due now (someone came online).
    func retryWaitingNow(_ now: Date, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            UPDATE allocations SET next_attempt_at = \(now)
            WHERE status = \(AllocationStatus.waiting) AND next_attempt_at > \(now)
            """, logger: logger
        )
    }

    /// Orders that found nobody and are due for another round, locked.
    func dueRetries(_ now: Date, limit: Int, on connection: PostgresConnection) async throws -> [String] {
        let rows = try await connection.queryWhileOpen(
            """
            SELECT order_id FROM allocations WHERE status = \(AllocationStatus.waiting) AND next_attempt_at <= \(now)
            ORDER BY next_attempt_at LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """, logger: logger
        )
        var due: [String] = []
        for try await orderId in rows.decode(String.self) { due.append(orderId) }
        return due
    }

    // MARK: Riders

    /// The nearest rider to `vendor` who is online with a fix recorded after `freshSince`, was never offered
    /// `orderId`, and is within `radiusMeters` (by the KNN index, in a cube around the vendor that holds the
    /// radius); locked, skipping riders another transaction holds. Returns the rider and their distance.
    func nearestEligibleRider(
        for orderId: String, near vendor: GeoPoint, radiusMeters: Double, freshSince: Date,
        on connection: PostgresConnection
    ) async throws -> (riderId: String, meters: Double)? {
        let rows = try await connection.queryWhileOpen(
            """
            SELECT r.rider_id, r.lat, r.lng
            FROM riders r
            WHERE r.status = \(RiderStatus.online) AND r.location_recorded_at > \(freshSince)
              AND public.cube_enlarge(sphere_point(\(vendor.lat), \(vendor.lng)), \(Self.chord(meters: radiusMeters)), 3)
                  OPERATOR(public.@>) sphere_point(r.lat, r.lng)
              AND NOT EXISTS (SELECT 1 FROM offers o WHERE o.order_id = \(orderId) AND o.rider_id = r.rider_id)
            ORDER BY sphere_point(r.lat, r.lng) OPERATOR(public.<->) sphere_point(\(vendor.lat), \(vendor.lng))
            LIMIT 1
            FOR UPDATE OF r SKIP LOCKED
            """, logger: logger
        )
        var chosen: (riderId: String, meters: Double)?
        for try await (riderId, lat, lng) in rows.decode((String, Double, Double).self) {
            let meters = GeoPoint(lat: lat, lng: lng).meters(to: vendor)
            if meters <= radiusMeters { chosen = (riderId, meters) }
        }
        return chosen
    }

    /// The straight-line distance between two points of the unit sphere `meters` apart along its surface.
    static func chord(meters: Double) -> Double { 2 * sin(meters / (2 * GeoPoint.earthRadiusMeters)) }

    /// The rider's status and name, locked, for an operator's assignment; nil if allocation never saw them.
    func lockRiderForAssignment(_ riderId: String, on connection: PostgresConnection) async throws
        -> (status: RiderStatus, name: String)?
    {
        let rows = try await connection.queryWhileOpen(
            "SELECT status, name FROM riders WHERE rider_id = \(riderId) FOR UPDATE", logger: logger)
        for try await (status, name) in rows.decode((RiderStatus, String).self) { return (status, name) }
        return nil
    }

    func rider(_ riderId: String, forUpdate: Bool = false, on connection: PostgresConnection) async throws -> RiderView?
    {
        var query: PostgresQuery = """
            SELECT rider_id, status, lat, lng, accuracy_meters, location_recorded_at, current_order_id, offline_reason
            FROM riders WHERE rider_id = \(riderId)
            """
        if forUpdate { query.sql += " FOR UPDATE" }
        let rows = try await connection.queryWhileOpen(query, logger: logger)
        for try await (id, status, lat, lng, accuracy, recordedAt, orderId, offlineReason)
            in rows.decode((String, RiderStatus, Double?, Double?, Double?, Date?, String?, OfflineReason?).self)
        {
            return RiderView(
                riderId: id, status: status,
                location: Self.location(lat: lat, lng: lng, accuracy: accuracy, recordedAt: recordedAt),
                currentOrderId: orderId,
                offlineReason: status == .offline ? offlineReason : nil)
        }
        return nil
    }

    /// Up to `limit` riders not Offline, most recently changed first (the operators' live map).
    func ridersOnDuty(limit: Int, on connection: PostgresConnection) async throws -> [OnDutyRider] {
        let rows = try await connection.queryWhileOpen(
            """
            SELECT rider_id, name, status, lat, lng, accuracy_meters, location_recorded_at, current_order_id
            FROM riders WHERE status <> 'offline' ORDER BY updated_at DESC LIMIT \(limit)
            """, logger: logger)
        var riders: [OnDutyRider] = []
        for try await (id, name, status, lat, lng, accuracy, recordedAt, orderId)
            in rows.decode((String, String, RiderStatus, Double?, Double?, Double?, Date?, String?).self)
        {
            let location = Self.location(lat: lat, lng: lng, accuracy: accuracy, recordedAt: recordedAt)
            riders.append(
                OnDutyRider(riderId: id, name: name, status: status, location: location, currentOrderId: orderId))
        }
        return riders
    }

    /// A rider row's fix, when it has one (its columns are all set or all NULL).
    private static func location(lat: Double?, lng: Double?, accuracy: Double?, recordedAt: Date?) -> RiderLocation? {
        guard let lat, let lng, let accuracy, let recordedAt else { return nil }
        return RiderLocation(lat: lat, lng: lng, accuracyMeters: accuracy, recordedAt: recordedAt)
    }

    /// The rider is online at `location` (one holding an offer stays offered).
    func putOnline(_ rider: PersonRef, at location: RiderLocation, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            INSERT INTO riders (rider_id, name, status, lat, lng, accuracy_meters, location_recorded_at)
            VALUES (\(rider.id), \(rider.name), \(RiderStatus.online), \(location.lat), \(location.lng),
                    \(location.accuracyMeters), \(location.recordedAt))
            ON CONFLICT (rider_id) DO UPDATE SET name = excluded.name,
                status = CASE WHEN riders.status = \(RiderStatus.offered) THEN riders.status ELSE excluded.status END,
                lat = excluded.lat, lng = excluded.lng, accuracy_meters = excluded.accuracy_meters,
                location_recorded_at = excluded.location_recorded_at, offline_reason = NULL, updated_at = now()
            """, logger: logger
        )
    }

    func putOffline(_ rider: PersonRef, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            INSERT INTO riders (rider_id, name, status) VALUES (\(rider.id), \(rider.name), \(RiderStatus.offline))
            ON CONFLICT (rider_id) DO UPDATE SET status = excluded.status, offline_reason = NULL,
                \(unescaped: Self.forgetPosition), updated_at = now()
            """, logger: logger
        )
    }

    /// The rider holds an offer.
    func markOffered(_ riderId: String, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            "UPDATE riders SET status = \(RiderStatus.offered), updated_at = now() WHERE rider_id = \(riderId)",
            logger: logger
        )
    }

    /// A rider who held an offer no longer does and is `status` (online, or offline for `reason`).
    func freeOfferedRider(
        _ riderId: String, to status: RiderStatus, reason: OfflineReason? = nil, on connection: PostgresConnection
    ) async throws {
        try await connection.queryWhileOpen(
            """
            UPDATE riders SET status = \(status), offline_reason = \(reason), updated_at = now()
                   \(unescaped: status == .offline ? ", " + Self.forgetPosition : "")
            WHERE rider_id = \(riderId) AND status = \(RiderStatus.offered)
            """, logger: logger
        )
    }

    /// Takes Offline the Online riders whose last precise fix was recorded before `cutoff` (or who have none);
    /// returns them.
    func demoteWithoutFix(before cutoff: Date, limit: Int, on connection: PostgresConnection) async throws -> [String] {
        try await riderIds(
            """
            UPDATE riders SET status = \(RiderStatus.offline), offline_reason = \(OfflineReason.noPreciseLocation),
                   \(unescaped: Self.forgetPosition), updated_at = now()
            WHERE rider_id IN (
                SELECT rider_id FROM riders
                WHERE status = \(RiderStatus.online) AND (location_recorded_at IS NULL OR location_recorded_at < \(cutoff))
                ORDER BY location_recorded_at NULLS FIRST LIMIT \(limit) FOR UPDATE SKIP LOCKED)
            RETURNING rider_id
            """, on: connection)
    }

    /// The rider is on `orderId` until it ends.
    func startDelivery(_ riderId: String, orderId: String, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            UPDATE riders SET status = \(RiderStatus.delivering), current_order_id = \(orderId), updated_at = now()
            WHERE rider_id = \(riderId)
            """, logger: logger
        )
    }

    /// The rider ids a statement returns.
    private func riderIds(_ query: PostgresQuery, on connection: PostgresConnection) async throws -> [String] {
        var riders: [String] = []
        for try await riderId in try await connection.queryWhileOpen(query, logger: logger).decode(String.self) {
            riders.append(riderId)
        }
        return riders
    }

    /// Frees the rider delivering `orderId` (only `riderId` when given); returns who it was (none if nobody was).
    func releaseRider(of orderId: String, only riderId: String? = nil, on connection: PostgresConnection) async throws
        -> [String]
    {
        try await riderIds(
            """
            UPDATE riders SET status = \(RiderStatus.online), current_order_id = NULL, updated_at = now()
            WHERE current_order_id = \(orderId) AND status = \(RiderStatus.delivering)
              AND (\(riderId)::text IS NULL OR rider_id = \(riderId))
            RETURNING rider_id
            """, on: connection)
    }

    /// An Offline rider's position is not kept (US-072: positions are ephemeral).
    private static let forgetPosition = "lat = NULL, lng = NULL, accuracy_meters = NULL, location_recorded_at = NULL"

    /// Moves an Online (or busy) rider to a newer position; an older one, or one of an Offline rider, is ignored.
    func move(_ position: PositionUpdated, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            UPDATE riders SET lat = \(position.lat), lng = \(position.lng), accuracy_meters = \(position.accuracyMeters),
                   location_recorded_at = \(position.recordedAt), updated_at = now()
            WHERE rider_id = \(position.courierId) AND status <> \(RiderStatus.offline)
              AND (location_recorded_at IS NULL OR location_recorded_at < \(position.recordedAt))
            """, logger: logger
        )
    }
}
