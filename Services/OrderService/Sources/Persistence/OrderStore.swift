import Contracts
import Foundation
import Logging
import PostgresNIO
import Realtime
import ServiceKit

// The store and the prepared statements only it runs, kept together: each statement is read with the method using it.

/// The order service's SQL for vendors, orders, service requests and the event log (the pickup saga's is in
/// ``PickupSagaStore``, reached through ``sagas``, but for its start, written with the pickup: ``RecordPickup``).
/// Every write takes the caller's connection, so it joins the caller's transaction if it has one.
package struct OrderStore: Sendable {
    package let outbox: Outbox
    /// The `order_update` each recorded event causes, written with it.
    let updates: OrderUpdates
    package let logger: Logger
    /// The pickup saga's SQL, logged with this store's logger.
    package let sagas: PickupSagaStore

    package init(outbox: Outbox, updates: OrderUpdates, logger: Logger) {
        self.outbox = outbox
        self.updates = updates
        self.logger = logger
        self.sagas = PickupSagaStore(logger: logger)
    }

    // MARK: Vendors

    package func insertVendor(_ vendor: VendorView, on connection: PostgresConnection) async throws {
        do {
            try await connection.queryWhileOpen(
                """
                INSERT INTO vendors (id, name, address_line1, area, lat, lng)
                VALUES (\(vendor.id), \(vendor.name), \(vendor.address.line1), \(vendor.address.area), \(vendor.address.lat), \(vendor.address.lng))
                """, logger: logger
            )
        } catch let error as PSQLError where error.sqlState == "23505" {
            throw OrderRecordError.vendorExists(vendor.id)
        }
    }

    package func vendor(_ id: String, on connection: PostgresConnection) async throws -> VendorView? {
        let rows = try await connection.queryWhileOpen(
            "SELECT id, name, address_line1, area, lat, lng FROM vendors WHERE id = \(id)", logger: logger
        )
        for try await (id, name, line1, area, lat, lng) in rows.decode(
            (String, String, String, String, Double, Double).self)
        {
            return VendorView(id: id, name: name, address: Address(line1: line1, area: area, lat: lat, lng: lng))
        }
        return nil
    }

    // MARK: Orders

    package func insertOrder(_ order: OrderView, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            INSERT INTO orders (id, customer_id, vendor_id, status, delivery_line1, delivery_area, delivery_lat, delivery_lng,
                                payment_mode, total_amount, requires_photo_proof, version, created_at, updated_at)
            VALUES (\(UUID(uuidString: order.id)), \(order.customerId), \(order.vendor.id), \(order.status.rawValue),
                    \(order.deliveryAddress.line1), \(order.deliveryAddress.area), \(order.deliveryAddress.lat),
                    \(order.deliveryAddress.lng), \(order.paymentMode.rawValue), \(order.totalAmount),
                    \(order.requiresPhotoProof), \(order.version), \(order.createdAt), \(order.updatedAt))
            """, logger: logger
        )
    }

    /// The order, locked for the rest of the transaction when `forUpdate`.
    /// - Throws: 404 `NOT_FOUND` if there is none.
    package func order(_ id: UUID, forUpdate: Bool = false, on connection: PostgresConnection) async throws -> OrderView
    {
        let bindings = PostgresBindings(id)
        let rows =
            forUpdate
            ? try await connection.queryWhileOpen(ReadOrderForUpdate.self, bindings, logger: logger)
            : try await connection.queryWhileOpen(ReadOrder.self, bindings, logger: logger)
        for row in rows {
            return try Self.order(from: row.makeRandomAccess())
        }
        throw OrderRecordError.noOrder(id)
    }

    /// The order and, in the same snapshot, the answer stored under `request`'s Idempotency-Key (nil if none): an
    /// answer stored with a change the order does not show yet is never seen.
    /// - Throws: 404 `NOT_FOUND` if there is no such order; 422 `IDEMPOTENCY_KEY_REUSED` if the key was used for
    ///   another request.
    package func order(_ id: UUID, answering request: IdempotentRequest, on connection: PostgresConnection)
        async throws -> (OrderView, IdempotentRequest.StoredAnswer?)
    {
        guard let key = request.key else { return (try await order(id, on: connection), nil) }
        let rows = try await connection.queryWhileOpen(
            ReadOrderAnswering.self, PostgresBindings(id, request.userId, key), logger: logger)
        for row in rows {
            let cells = row.makeRandomAccess()
            return (try Self.order(from: cells), try request.storedAnswer(in: cells))
        }
        throw OrderRecordError.noOrder(id)
    }

    /// An order's columns as ``order(from:)`` reads them, with its vendor and proof photo.
    static let selectOrders = """
        SELECT o.id, o.status, o.customer_id, v.id AS vendor_id, v.name AS vendor_name, v.address_line1 AS vendor_line1,
               v.area AS vendor_area, v.lat AS vendor_lat, v.lng AS vendor_lng, o.delivery_line1, o.delivery_area,
               o.delivery_lat, o.delivery_lng, o.payment_mode, o.total_amount, o.requires_photo_proof, o.rider_id,
               o.rider_name, o.rider_arrived_at, p.content_type AS photo_type, octet_length(p.bytes) AS photo_size,
               p.uploaded_at AS photo_uploaded_at, o.version, o.created_at, o.updated_at,
               (extract(epoch FROM o.created_at) * 1000000)::bigint AS created_micros
        FROM orders o JOIN vendors v ON v.id = o.vendor_id LEFT JOIN order_proof_photos p ON p.order_id = o.id
        """

    /// A page of vendor `vendorId`'s orders, oldest first, after `cursor`; only those not yet delivered or
    /// cancelled when `activeOnly`. Returns the page and, if more follow, the cursor of its last order.
    package func orders(
        ofVendor vendorId: String, activeOnly: Bool, after cursor: OrderPageCursor?, limit: Int,
        on connection: PostgresConnection
    ) async throws -> (orders: [OrderView], next: OrderPageCursor?) {
        let ended = [OrderStatus.delivered.rawValue, OrderStatus.cancelled.rawValue]
        let (seconds, micros) = cursor?.createdSecondsAndMicros ?? (0, 0)
        let query: PostgresQuery = """
            \(unescaped: Self.selectOrders)
            WHERE o.vendor_id = \(vendorId) AND (\(!activeOnly) OR o.status <> ALL(\(ended)))
              AND (\(cursor == nil) OR (o.created_at, o.id) >
                   ('epoch'::timestamptz + \(seconds) * interval '1 second' + \(micros) * interval '1 microsecond',
                    \(cursor?.orderId)))
            ORDER BY o.created_at, o.id LIMIT \(limit + 1)
            """
        let rows = try await connection.queryWhileOpen(query, logger: logger)
        var orders: [OrderView] = []
        var last: OrderPageCursor?
        var more = false
        for try await row in rows {
            guard orders.count < limit else {
                more = true
                continue
            }
            let cells = row.makeRandomAccess()
            let order = try Self.order(from: cells)
            orders.append(order)
            last = OrderPageCursor(
                createdMicros: try cells["created_micros"].decode(Int64.self), orderId: UUID(uuidString: order.id)!)
        }
        return (orders, more ? last : nil)
    }

    /// A status column's value. One this build does not know (written by a newer version, during a rolling
    /// deploy) is an error, never taken for another status.
    private static func status<Status: RawRepresentable<String>>(_ cell: PostgresCell, as _: Status.Type) throws
        -> Status
    {
        let value = try cell.decode(String.self)
        guard let status = Status(rawValue: value) else {
            throw UnknownStatus(column: cell.columnName, value: value, known: "\(Status.self)")
        }
        return status
    }

    private static func order(from cells: PostgresRandomAccessRow) throws -> OrderView {
        let riderId = try cells["rider_id"].decode(String?.self)
        let riderName = try cells["rider_name"].decode(String?.self)
        let photoType = try cells["photo_type"].decode(String?.self)
        return OrderView(
            id: try cells["id"].decode(UUID.self).uuidString.lowercased(),
            status: try status(cells["status"], as: OrderStatus.self),
            customerId: try cells["customer_id"].decode(String.self),
            vendor: VendorRef(
                id: try cells["vendor_id"].decode(String.self), name: try cells["vendor_name"].decode(String.self),
                address: Address(
                    line1: try cells["vendor_line1"].decode(String.self),
                    area: try cells["vendor_area"].decode(String.self),
                    lat: try cells["vendor_lat"].decode(Double.self), lng: try cells["vendor_lng"].decode(Double.self)
                )
            ),
            deliveryAddress: Address(
                line1: try cells["delivery_line1"].decode(String.self),
                area: try cells["delivery_area"].decode(String.self),
                lat: try cells["delivery_lat"].decode(Double.self), lng: try cells["delivery_lng"].decode(Double.self)
            ),
            paymentMode: PaymentMode(rawValue: try cells["payment_mode"].decode(String.self)) ?? .prepaid,
            totalAmount: try cells["total_amount"].decode(Decimal.self),
            requiresPhotoProof: try cells["requires_photo_proof"].decode(Bool.self),
            rider: riderId.map { PersonRef(id: $0, name: riderName ?? "") },
            riderArrivedAt: try cells["rider_arrived_at"].decode(Date?.self),
            proofPhoto: try photoType.map {
                ProofPhotoView(
                    contentType: $0, sizeBytes: try cells["photo_size"].decode(Int.self),
                    uploadedAt: try cells["photo_uploaded_at"].decode(Date.self)
                )
            },
            version: try cells["version"].decode(Int.self),
            createdAt: try cells["created_at"].decode(Date.self),
            updatedAt: try cells["updated_at"].decode(Date.self)
        )
    }

    /// Writes the order's new state (status, rider, arrival) and bumps its version.
    package func update(_ order: OrderView, on connection: PostgresConnection) async throws {
        let bindings = PostgresBindings(
            order.status.rawValue, order.rider?.id, order.rider?.name, order.riderArrivedAt, order.version,
            order.updatedAt, UUID(uuidString: order.id))
        try await connection.queryWhileOpen(UpdateOrder.self, bindings, logger: logger)
    }

    package func insertProofPhoto(
        orderId: UUID, contentType: String, bytes: ByteBuffer, riderId: String, on connection: PostgresConnection
    )
        async throws
    {
        try await connection.queryWhileOpen(
            """
            INSERT INTO order_proof_photos (order_id, content_type, bytes, uploaded_by) VALUES (\(orderId), \(contentType), \(bytes), \(riderId))
            ON CONFLICT (order_id) DO UPDATE SET content_type = excluded.content_type, bytes = excluded.bytes,
                uploaded_by = excluded.uploaded_by, uploaded_at = now()
            """, logger: logger
        )
    }

    // MARK: Event log and outbox

    /// Appends `envelope` to the event log of its aggregate (as entry `sequence`) and to the outbox after
    /// `alsoPublishing` (events of its change that are not in the log, such as a push), with its `order_update` to
    /// the `/orders` sockets: one statement.
    package func record<Payload: EventPayload>(
        _ envelope: EventEnvelope<Payload>, aggregateType: String, sequence: Int, actor: OrderActor?,
        alsoPublishing earlier: [OutboxEntry] = [], on connection: PostgresConnection
    ) async throws {
        let bindings = try recordBindings(
            envelope, aggregateType: aggregateType, sequence: sequence, actor: actor, alsoPublishing: earlier)
        try await connection.queryWhileOpen(RecordOrderEvent.self, bindings, logger: logger)
    }

    /// Writes `order`'s new state if it is still at the version before (`order.version - 1`), with what ``record``
    /// writes for `envelope` (the order's next log entry), the pickup's saga when `startingSagaNotifying` names the
    /// customer's push, and `answering`'s answer under its request's Idempotency-Key: one statement, atomic without a
    /// transaction. Returns false, with nothing written, if another change to the order got there first.
    /// - Throws: what ``IdempotentRequest/isKeyTaken(_:)`` recognises if another request with the key stored first.
    package func recordTransition<Payload: EventPayload>(
        _ order: OrderView, _ envelope: EventEnvelope<Payload>, actor: OrderActor?,
        alsoPublishing earlier: [OutboxEntry] = [], startingSagaNotifying notificationId: String? = nil,
        answering: (request: IdempotentRequest, answer: IdempotentRequest.StoredAnswer)? = nil,
        on connection: PostgresConnection
    ) async throws -> Bool {
        var bindings = try recordBindings(
            envelope, aggregateType: "order", sequence: order.version, actor: actor, alsoPublishing: earlier)
        bindings.append(order.status.rawValue)
        bindings.append(order.rider?.id)
        bindings.append(order.rider?.name)
        bindings.append(order.riderArrivedAt)
        if let notificationId { bindings.append(notificationId) }
        let answered = answering?.request.key != nil
        if let (request, answer) = answering, answered {
            request.appendStoreArguments(status: answer.status, body: answer.body, to: &bindings)
        }
        let rows =
            switch (notificationId != nil, answered) {
            case (false, false):
                try await connection.queryWhileOpen(RecordOrderTransition.self, bindings, logger: logger)
            case (true, false): try await connection.queryWhileOpen(RecordPickup.self, bindings, logger: logger)
            case (false, true):
                try await connection.queryWhileOpen(RecordAnsweredOrderTransition.self, bindings, logger: logger)
            case (true, true): try await connection.queryWhileOpen(RecordAnsweredPickup.self, bindings, logger: logger)
            }
        return !rows.isEmpty
    }

    /// The values of ``RecordOrderEvent``'s parameters.
    private func recordBindings<Payload: EventPayload>(
        _ envelope: EventEnvelope<Payload>, aggregateType: String, sequence: Int, actor: OrderActor?,
        alsoPublishing earlier: [OutboxEntry]
    ) throws -> PostgresBindings {
        let entry = try OutboxEntry(envelope)
        var bindings = PostgresBindings(
            UUID(uuidString: envelope.aggregateId), aggregateType, sequence, envelope.eventId, envelope.type, actor?.id,
            actor?.role.rawValue, entry.payload, envelope.occurredAt)
        outbox.appendWriteArguments(earlier + [entry], to: &bindings)
        try updates.appendEmitArguments(envelope, to: &bindings)
        return bindings
    }

    /// The event log of an order or service request, oldest first.
    package func events(of aggregateId: UUID, on connection: PostgresConnection) async throws -> [OrderEventView] {
        let rows = try await connection.queryWhileOpen(
            """
            SELECT sequence, event_id, event_type, actor_id, actor_role, occurred_at, (envelope -> 'payload')::text
            FROM order_events WHERE aggregate_id = \(aggregateId) ORDER BY sequence
            """, logger: logger
        )
        var events: [OrderEventView] = []
        for try await (sequence, eventId, type, actorId, actorRole, occurredAt, payload)
            in rows.decode((Int, UUID, String, String?, String?, Date, String).self)
        {
            events.append(
                OrderEventView(
                    sequence: sequence, eventId: eventId.uuidString.lowercased(), type: type, actorId: actorId,
                    actorRole: actorRole,
                    occurredAt: occurredAt, payload: (try? JSONValue.parse(payload)) ?? .null
                )
            )
        }
        return events
    }

    /// The published envelope of an event, to republish it unchanged.
    package func envelope(eventId: UUID, on connection: PostgresConnection) async throws -> String? {
        let rows = try await connection.queryWhileOpen(
            "SELECT envelope::text FROM order_events WHERE event_id = \(eventId)", logger: logger)
        for try await envelope in rows.decode(String.self) { return envelope }
        return nil
    }

    // MARK: Service requests

    package func insertServiceRequest(_ request: ServiceRequestView, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            INSERT INTO service_requests (id, customer_id, status, address_line1, area, lat, lng, description, version, created_at, updated_at)
            VALUES (\(UUID(uuidString: request.id)), \(request.customerId), \(request.status.rawValue), \(request.serviceAddress.line1),
                    \(request.serviceAddress.area), \(request.serviceAddress.lat), \(request.serviceAddress.lng),
                    \(request.description), \(request.version), \(request.createdAt), \(request.updatedAt))
            """, logger: logger
        )
    }

    package func serviceRequest(_ id: UUID, forUpdate: Bool = false, on connection: PostgresConnection) async throws
        -> ServiceRequestView
    {
        var query: PostgresQuery = """
            SELECT id, status, customer_id, address_line1, area, lat, lng, description, technician_id, technician_name,
                   version, created_at, updated_at
            FROM service_requests WHERE id = \(id)
            """
        if forUpdate { query.sql += " FOR UPDATE" }
        let rows = try await connection.queryWhileOpen(query, logger: logger)
        for try await row in rows {
            let cells = row.makeRandomAccess()
            let technicianId = try cells["technician_id"].decode(String?.self)
            return ServiceRequestView(
                id: try cells["id"].decode(UUID.self).uuidString.lowercased(),
                status: try Self.status(cells["status"], as: ServiceRequestStatus.self),
                customerId: try cells["customer_id"].decode(String.self),
                serviceAddress: Address(
                    line1: try cells["address_line1"].decode(String.self), area: try cells["area"].decode(String.self),
                    lat: try cells["lat"].decode(Double.self), lng: try cells["lng"].decode(Double.self)
                ),
                description: try cells["description"].decode(String.self),
                technician: technicianId.map {
                    PersonRef(id: $0, name: (try? cells["technician_name"].decode(String?.self)) ?? nil ?? "")
                },
                version: try cells["version"].decode(Int.self),
                createdAt: try cells["created_at"].decode(Date.self),
                updatedAt: try cells["updated_at"].decode(Date.self)
            )
        }
        throw OrderRecordError.noServiceRequest(id)
    }

    package func update(_ request: ServiceRequestView, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            UPDATE service_requests SET status = \(request.status.rawValue), technician_id = \(request.technician?.id),
                   technician_name = \(request.technician?.name), version = \(request.version), updated_at = \(request.updatedAt)
            WHERE id = \(UUID(uuidString: request.id))
            """, logger: logger
        )
    }
}

/// Order $1 with its vendor and proof photo.
enum ReadOrder: PreparedStatementText {
    static let sql = OrderStore.selectOrders + " WHERE o.id = $1::uuid"
}

/// ``ReadOrder`` with the answer stored under user $2's Idempotency-Key $3, if any.
enum ReadOrderAnswering: PreparedStatementText {
    static let sql = """
        SELECT o.*, \(IdempotentRequest.storedColumns(of: "k"))
        FROM (\(ReadOrder.sql)) o
        LEFT JOIN idempotency_keys k ON k.user_id = $2::text AND k.idempotency_key = $3::text
        """
}

/// ``ReadOrder``, the order's row locked for the rest of the transaction.
enum ReadOrderForUpdate: PreparedStatementText {
    static let sql = ReadOrder.sql + " FOR UPDATE OF o"
}

/// Writes order $7's status $1, rider $2 named $3, arrival $4, version $5 and update time $6.
enum UpdateOrder: PreparedStatementText {
    static let sql = """
        UPDATE orders SET status = $1::text, rider_id = $2::text, rider_name = $3::text,
               rider_arrived_at = $4::timestamptz, version = $5::integer, updated_at = $6::timestamptz
        WHERE id = $7::uuid
        """
}

/// The columns of an `order_events` row and their values from $1-$9 (``RecordOrderEvent``).
private let orderEventColumns = """
    order_events (aggregate_id, aggregate_type, sequence, event_id, event_type, actor_id, actor_role, envelope,
                  occurred_at)
    """
private let orderEventValues = """
    $1::uuid, $2::text, $3::integer, $4::uuid, $5::text, $6::text, $7::text, $8::jsonb, $9::timestamptz
    """

/// Appends event $4 of type $5 to aggregate $1 (of type $2) as entry $3, by actor $6 in role $7: envelope $8,
/// occurred at $9; writes the outbox's rows ($10-$15) and the event's `order_update` ($16-$22).
enum RecordOrderEvent: PreparedStatementText {
    static let sql = """
        WITH logged AS (INSERT INTO \(orderEventColumns) VALUES (\(orderEventValues)))
        SELECT \(Outbox.writeCall(parametersFrom: 10)), \(OrderUpdates.emitCall(parametersFrom: 16))
        """
}

/// ``RecordOrderEvent`` for order $1's transition to version $3 at $9, if it is still at the version before: its
/// status $23, rider $24 named $25 and arrival $26 written with it. A row if it was written, none if not.
enum RecordOrderTransition: PreparedStatementText {
    static let sql = transitionSQL(startingSaga: false, storingAnswer: false)
}

/// ``RecordOrderTransition`` of a pickup, whose saga starts with it (the customer's push $27; the vendor's step is
/// the pickup's `order_update`).
enum RecordPickup: PreparedStatementText {
    static let sql = transitionSQL(startingSaga: true, storingAnswer: false)
}

/// ``RecordOrderTransition`` with the answer of the request that made it stored under its Idempotency-Key ($27-$31).
enum RecordAnsweredOrderTransition: PreparedStatementText {
    static let sql = transitionSQL(startingSaga: false, storingAnswer: true)
}

/// ``RecordPickup`` with the answer of the request that made it stored under its Idempotency-Key ($28-$32).
enum RecordAnsweredPickup: PreparedStatementText {
    static let sql = transitionSQL(startingSaga: true, storingAnswer: true)
}

/// The statement of an order's transition (``RecordOrderTransition``), the saga's start and the answer's store
/// written with it when asked.
private func transitionSQL(startingSaga: Bool, storingAnswer: Bool) -> String {
    var also = ""
    if startingSaga {
        also += """
            saga AS (
                INSERT INTO pickup_sagas (order_id, pickup_event_id, notification_id, started_at, vendor_updated_at)
                SELECT id, $4::uuid, $27::text, $9::timestamptz, $9::timestamptz FROM updated
            ),
            """
    }
    if storingAnswer {
        let first = startingSaga ? 28 : 27
        also += "answered AS (\(IdempotentRequest.storeSQL(parametersFrom: first, readingFrom: "updated"))),"
    }
    return """
        WITH updated AS (
            UPDATE orders SET status = $23::text, rider_id = $24::text, rider_name = $25::text,
                   rider_arrived_at = $26::timestamptz, version = $3::integer, updated_at = $9::timestamptz
            WHERE id = $1::uuid AND version = $3::integer - 1
            RETURNING id
        ), \(also)
        logged AS (INSERT INTO \(orderEventColumns) SELECT \(orderEventValues) FROM updated)
        SELECT \(Outbox.writeCall(parametersFrom: 10)), \(OrderUpdates.emitCall(parametersFrom: 16)) FROM updated
        """
}
