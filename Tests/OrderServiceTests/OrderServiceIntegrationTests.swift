import Contracts
import Foundation
import OrderService
import PostgresNIO
import Realtime
import RealtimeTesting
import ServiceKit
import TestSupport
import Testing

@Suite("Order service against Postgres and the broker", .timeLimit(.minutes(3)))
struct OrderServiceIntegrationTests {
    @Test(
        "the pickup: one statement, its event log row, OrderPickedUp and the customer's push on the topics, the saga")
    func pickup() async throws {
        let harness = try await OrderHarness.get()
        let order = try await harness.readyOrder()
        let answer = try await harness.post("/v1/orders/\(order.id)/pickup", harness.rider)
        #expect(answer.status == 200, "\(answer.text)")
        let picked = try answer.decode(OrderView.self)
        #expect(picked.status == .inTransit)
        #expect(picked.version == order.version + 1)

        let log = try await harness.client.get("/v1/orders/\(order.id)/events", token: harness.customer)
        let types = try JSONValue.parse(log.text)["events"].map { events -> [String] in
            guard case .array(let entries) = events else { return [] }
            return entries.compactMap { $0["type"]?.stringValue }
        }
        #expect(
            types == [
                "OrderCreated", "OrderAccepted", "OrderReadyForPickup", "RiderAssigned", "RiderArrivedAtStore",
                "OrderPickedUp",
            ])

        let events = try await publishedEvents(on: .ordersEvents, key: order.id) { events in
            events.contains { $0.header.type == OrderPickedUp.eventType }
        }
        let pickedUp = try #require(events.last?.payload(as: OrderPickedUp.self))
        #expect(pickedUp.customerId == order.customerId)
        #expect(pickedUp.vendor.id == harness.vendorId)
        #expect(pickedUp.rider == PersonRef(id: harness.riderId, name: "Ravi"))
        #expect(pickedUp.destination == order.deliveryAddress)

        let pushes = try await publishedEvents(on: .notificationsRequests, key: order.customerId) { events in
            events.contains { $0.payload(as: PushRequested.self)?.correlationId == order.id }
        }
        let push = try #require(
            pushes.compactMap { $0.payload(as: PushRequested.self) }.first { $0.correlationId == order.id })
        #expect(push.title == "Your order is on the way")
        #expect(push.kind == "order_picked_up")
        #expect(push.data["link"] == "app://orders/\(order.id)/track")

        let saga = try await harness.client.get("/v1/orders/\(order.id)/saga", token: harness.admin).decode(
            PickupSagaView.self)
        #expect(saga.orderId == order.id)
        #expect(!saga.completed)
        #expect(try await harness.client.get("/v1/orders/\(order.id)/saga", token: harness.customer).status == 403)

        // Location and Notification report back; the vendor's dashboard stream reports itself.
        try await harness.reportTrackingStarted(order)
        try await harness.producer.send(
            topic: Topic.notificationsEvents.rawValue, key: order.customerId,
            value: try ContractCoding.encode(
                EventEnvelope(
                    aggregateId: order.customerId,
                    occurredAt: Date(),
                    payload: PushSent(
                        notificationId: push.notificationId, userId: order.customerId, kind: push.kind,
                        correlationId: order.id,
                        deviceCount: 1, sentAt: Date()
                    )
                )
            )
        )
        try await eventually(timeout: .seconds(30), "the saga completed") {
            let saga = try await harness.client.get("/v1/orders/\(order.id)/saga", token: harness.admin).decode(
                PickupSagaView.self)
            return saga.completed && saga.steps.trackingStarted.done && saga.steps.customerNotified.done
                && saga.steps.vendorUpdated.done
        }
    }

    @Test("the customer's push failed for good: once the other steps report, the saga ends failed naming why")
    func sagaCustomerUnreachable() async throws {
        let harness = try await OrderHarness.get()
        let order = try await harness.readyOrder()
        #expect(try await harness.post("/v1/orders/\(order.id)/pickup", harness.rider).status == 200)
        let pushes = try await publishedEvents(on: .notificationsRequests, key: order.customerId) { events in
            events.contains { $0.payload(as: PushRequested.self)?.correlationId == order.id }
        }
        let push = try #require(
            pushes.compactMap { $0.payload(as: PushRequested.self) }.first { $0.correlationId == order.id })
        try await harness.publish(
            PushFailed(
                notificationId: push.notificationId, userId: order.customerId, kind: push.kind, correlationId: order.id,
                reason: "no_devices", failedAt: Date()),
            aggregateId: order.customerId)
        try await harness.reportTrackingStarted(order)
        try await eventually(timeout: .seconds(30), "the saga failed") {
            try await harness.client.get("/v1/orders/\(order.id)/saga", token: harness.admin).decode(
                PickupSagaView.self
            ).status == .failed
        }
        let saga = try await harness.client.get("/v1/orders/\(order.id)/saga", token: harness.admin).decode(
            PickupSagaView.self)
        #expect(saga.failure == "the customer could not be notified: no_devices")
        #expect(saga.steps.trackingStarted.done && saga.steps.vendorUpdated.done && !saga.steps.customerNotified.done)
    }

    @Test("another rider gets 403 NOT_ASSIGNED_RIDER; other roles 403 FORBIDDEN")
    func wrongActors() async throws {
        let harness = try await OrderHarness.get()
        let order = try await harness.readyOrder()
        let other = try await harness.post("/v1/orders/\(order.id)/pickup", harness.otherRider)
        #expect(other.status == 403)
        #expect(other.errorCode == "NOT_ASSIGNED_RIDER")
        for token in [harness.customer, harness.vendor] {
            let answer = try await harness.post("/v1/orders/\(order.id)/pickup", token)
            #expect(answer.status == 403)
            #expect(answer.errorCode == "FORBIDDEN")
        }
        #expect(try await harness.client.get("/v1/orders/\(order.id)", token: harness.otherRider).status == 403)
        #expect(try await harness.post("/v1/orders/\(order.id)/accept", harness.customer).status == 403)
        #expect(try await harness.order(order.id).status == .readyForPickup)
    }

    @Test(
        "wrong states get 409 naming the current state; a cancelled order ORDER_CANCELLED; pickup before arrival RIDER_NOT_ARRIVED"
    )
    func wrongStates() async throws {
        let harness = try await OrderHarness.get()
        let fresh = try await harness.createOrder()
        for path in ["ready", "arrived", "pickup", "deliver"] {
            let token = path == "ready" ? harness.vendor : harness.rider
            let answer = try await harness.post("/v1/orders/\(fresh.id)/\(path)", token)
            #expect([403, 409].contains(answer.status), "\(path): \(answer.text)")
        }
        #expect(try await harness.post("/v1/orders/\(fresh.id)/accept", harness.vendor).status == 200)
        let twice = try await harness.post("/v1/orders/\(fresh.id)/accept", harness.vendor)
        #expect(twice.status == 409)
        #expect(twice.errorCode == "ORDER_STATE_CONFLICT")
        #expect(try JSONValue.parse(twice.text)["error"]?["details"]?["currentState"] == .string("Preparing"))

        let notArrived = try await harness.readyOrder(arrived: false)
        let early = try await harness.post("/v1/orders/\(notArrived.id)/pickup", harness.rider)
        #expect(early.status == 409)
        #expect(early.errorCode == "RIDER_NOT_ARRIVED")
        let deliverEarly = try await harness.post("/v1/orders/\(notArrived.id)/deliver", harness.rider)
        #expect(deliverEarly.errorCode == "ORDER_STATE_CONFLICT")

        #expect(try await harness.post("/v1/orders/\(notArrived.id)/cancel", harness.customer).status == 200)
        let cancelled = try await harness.post("/v1/orders/\(notArrived.id)/pickup", harness.rider)
        #expect(cancelled.status == 409)
        #expect(cancelled.errorCode == "ORDER_CANCELLED")
    }

    @Test("cancel and pickup at the same time: exactly one wins, every time, and the log never shows both")
    func cancellationRace() async throws {
        let harness = try await OrderHarness.get()
        var orders: [OrderView] = []
        for _ in 0..<12 { orders.append(try await harness.readyOrder()) }
        for order in orders {
            async let cancel = harness.post("/v1/orders/\(order.id)/cancel", harness.vendor)
            async let pickup = harness.post("/v1/orders/\(order.id)/pickup", harness.rider)
            let statuses = [try await cancel.status, try await pickup.status].sorted()
            #expect(statuses == [200, 409], "order \(order.id): \(statuses)")
            let log = try await harness.client.get("/v1/orders/\(order.id)/events", token: harness.admin).text
            #expect(log.contains("\"OrderCancelled\"") != log.contains("\"OrderPickedUp\""))
            let final = try await harness.order(order.id)
            #expect(final.status == (log.contains("\"OrderCancelled\"") ? .cancelled : .inTransit))
        }
    }

    @Test(
        "one order changed by many requests at once: the change is written once, whole (log, outbox, order_update), and the others get 409"
    )
    func concurrentTransitions() async throws {
        let harness = try await OrderHarness.get()
        let order = try await harness.createOrder()
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask { try await harness.post("/v1/orders/\(order.id)/accept", harness.vendor).status }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.sorted() == [200] + Array(repeating: 409, count: 7))
        #expect(try await harness.order(order.id).version == order.version + 1)
        let id = try #require(UUID(uuidString: order.id))
        try await withTestDatabase(schema: harness.schema, migrations: []) { database in
            let logged = try await database.scalar(
                "SELECT count(*) FROM order_events WHERE aggregate_id = \(id) AND event_type = 'OrderAccepted'",
                as: Int.self)
            let queued = try await database.scalar(
                "SELECT count(*) FROM outbox WHERE message_key = \(order.id) AND event_type = 'OrderAccepted'",
                as: Int.self)
            let emitted = try await database.scalar(
                """
                SELECT count(*) FROM realtime_emits
                WHERE room = 'admins' AND packet LIKE '%' || \(order.id) || '%OrderAccepted%'
                """, as: Int.self)
            #expect([logged, queued, emitted] == [1, 1, 1])
        }
    }

    @Test(
        "a retry with the same Idempotency-Key returns the first answer and changes nothing; the key with another request is refused"
    )
    func idempotentRetry() async throws {
        let harness = try await OrderHarness.get()
        let order = try await harness.readyOrder()
        let key = UUID().uuidString
        let first = try await harness.post("/v1/orders/\(order.id)/pickup", harness.rider, key: key)
        let retry = try await harness.post("/v1/orders/\(order.id)/pickup", harness.rider, key: key)
        #expect(first.status == 200)
        #expect(retry.status == 200)
        #expect(retry.body == first.body)
        #expect(retry.headers["idempotent-replayed"] == "true")
        let log = try await harness.client.get("/v1/orders/\(order.id)/events", token: harness.admin).text
        #expect(log.components(separatedBy: "\"OrderPickedUp\"").count == 2)
        let reused = try await harness.post("/v1/orders/\(order.id)/deliver", harness.rider, key: key)
        #expect(reused.status == 422)
        #expect(reused.errorCode == "IDEMPOTENCY_KEY_REUSED")
        let without = try await harness.post("/v1/orders/\(order.id)/pickup", harness.rider)
        #expect(without.status == 409)
    }

    @Test("the same Idempotency-Key sent many times at once: one change, every request gets its answer")
    func concurrentRetries() async throws {
        let harness = try await OrderHarness.get()
        let order = try await harness.readyOrder()
        let key = UUID().uuidString
        let answers = try await withThrowingTaskGroup(of: ServiceClient.Answer.self) { group in
            for _ in 0..<8 {
                group.addTask { try await harness.post("/v1/orders/\(order.id)/pickup", harness.rider, key: key) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.map(\.status) == Array(repeating: 200, count: 8))
        #expect(Set(answers.map(\.body)).count == 1)
        #expect(answers.filter { $0.headers["idempotent-replayed"] == "true" }.count == 7)
        let log = try await harness.client.get("/v1/orders/\(order.id)/events", token: harness.admin).text
        #expect(log.components(separatedBy: "\"OrderPickedUp\"").count == 2)
        #expect(try await harness.order(order.id).version == order.version + 1)
    }

    @Test("the event log refuses UPDATE, DELETE and TRUNCATE")
    func appendOnlyLog() async throws {
        let harness = try await OrderHarness.get()
        _ = try await harness.createOrder()
        try await withTestDatabase(schema: harness.schema, migrations: []) { database in
            for statement in [
                "UPDATE order_events SET event_type = 'Forged'", "DELETE FROM order_events", "TRUNCATE order_events",
            ] {
                await #expect {
                    try await database.client.query(PostgresQueryBuilder.unsafe(statement), logger: database.logger)
                } throws: { error in
                    "\(String(reflecting: error))".contains("append-only")
                }
            }
            let count = try await database.scalar("SELECT count(*) FROM order_events", as: Int.self) ?? 0
            #expect(count > 0)
        }
    }

    @Test("a status this build does not know (a newer version's) fails the read; it is never shown as cancelled")
    func unknownStatus() async throws {
        let harness = try await OrderHarness.get()
        let order = try await harness.createOrder()
        try await withTestDatabase(schema: harness.schema, migrations: []) { database in
            // What a newer version's migration would allow; other tests' orders keep their statuses.
            for statement in [
                "ALTER TABLE orders DROP CONSTRAINT IF EXISTS orders_status_check",
                "UPDATE orders SET status = 'Teleported' WHERE id = '\(order.id)'",
            ] {
                try await database.client.query(PostgresQueryBuilder.unsafe(statement), logger: database.logger)
            }
        }
        let response = try await harness.client.get("/v1/orders/\(order.id)", token: harness.customer)
        #expect(response.status == 500)
        #expect(response.errorCode == "INTERNAL_ERROR")
    }

    @Test(
        "bad input gets its 4xx and code: malformed JSON, missing fields, bad ids, unknown ids, wrong roles, no token")
    func badInput() async throws {
        let harness = try await OrderHarness.get()
        let client = harness.client
        let cases: [(ServiceClient.Answer, Int, String)] = [
            (try await client.post("/v1/orders", token: harness.customer, raw: "{\"vendorId\":"), 400, "INVALID_JSON"),
            (
                try await client.post("/v1/orders", token: harness.customer, raw: "{\"vendorId\":\"x\"}"), 400,
                "VALIDATION_FAILED"
            ),
            (
                try await client.post("/v1/orders", token: harness.customer, raw: "{}", contentType: "text/plain"), 415,
                "UNSUPPORTED_MEDIA_TYPE"
            ),
            (
                try await client.post(
                    "/v1/orders", token: harness.customer, json: OrderHarness.NewOrder(vendorId: "no-such-vendor")),
                422,
                "VALIDATION_FAILED"
            ),
            (
                try await client.post(
                    "/v1/orders", token: harness.vendor, json: OrderHarness.NewOrder(vendorId: harness.vendorId)), 403,
                "FORBIDDEN"
            ),
            (
                try await client.post("/v1/orders", json: OrderHarness.NewOrder(vendorId: harness.vendorId)), 401,
                "UNAUTHORIZED"
            ),
            (try await client.get("/v1/orders/not-a-uuid", token: harness.admin), 400, "BAD_REQUEST"),
            (try await client.get("/v1/orders/\(UUID().uuidString)", token: harness.admin), 404, "NOT_FOUND"),
            (try await harness.post("/v1/orders/\(UUID().uuidString)/pickup", harness.rider), 404, "NOT_FOUND"),
            (try await client.post("/v1/vendors", token: harness.customer, raw: "{}"), 403, "FORBIDDEN"),
        ]
        for (answer, status, code) in cases {
            #expect(answer.status == status, "\(answer.text)")
            #expect(answer.errorCode == code, "\(answer.text)")
        }
        var bad = OrderHarness.NewOrder(vendorId: harness.vendorId)
        bad.deliveryAddress.lat = 123
        let outOfRange = try await client.post("/v1/orders", token: harness.customer, json: bad)
        #expect(outOfRange.status == 400)
        #expect(outOfRange.text.contains("deliveryAddress.lat"))
        let duplicateVendor = try await client.post(
            "/v1/vendors", token: harness.admin,
            raw: #"{"id":"\#(harness.vendorId)","name":"X","address":{"line1":"a","area":"b","lat":1,"lng":2}}"#
        )
        #expect(duplicateVendor.status == 409)
        #expect(duplicateVendor.errorCode == "ALREADY_EXISTS")
    }

    @Test("hostile strings and amounts: NUL characters, limits in bytes, more than two decimals")
    func hostileInput() async throws {
        let harness = try await OrderHarness.get()
        let client = harness.client
        var nul = OrderHarness.NewOrder(vendorId: harness.vendorId)
        nul.deliveryAddress.line1 = "a\u{0}b"
        let withNUL = try await client.post("/v1/orders", token: harness.customer, json: nul)
        #expect(withNUL.status == 400, "\(withNUL.text)")
        #expect(withNUL.errorCode == "INVALID_CHARACTER")
        // One character, about 1 MB: "a" and 260,000 combining accents.
        var accents = OrderHarness.NewOrder(vendorId: harness.vendorId)
        accents.deliveryAddress.line1 = "a" + String(repeating: "\u{301}", count: 260_000)
        let oneHugeCharacter = try await client.post("/v1/orders", token: harness.customer, json: accents)
        #expect(oneHugeCharacter.status == 400, "\(oneHugeCharacter.text.prefix(300))")
        #expect(oneHugeCharacter.errorCode == "VALIDATION_FAILED")
        #expect(oneHugeCharacter.text.contains("deliveryAddress.line1"))
        var cents = OrderHarness.NewOrder(vendorId: harness.vendorId)
        cents.totalAmount = Decimal(string: "12.345")!
        let thirdDecimal = try await client.post("/v1/orders", token: harness.customer, json: cents)
        #expect(thirdDecimal.status == 400)
        #expect(thirdDecimal.text.contains("two decimals"))
        cents.totalAmount = Decimal(string: "12.30")!
        #expect(try await client.post("/v1/orders", token: harness.customer, json: cents).status == 201)
        let vendorWithNUL = try await client.post(
            "/v1/vendors", token: harness.admin,
            raw: #"{"id":"v-nul","name":"X\u0000","address":{"line1":"a","area":"b","lat":1,"lng":2}}"#
        )
        #expect(vendorWithNUL.errorCode == "INVALID_CHARACTER")
        #expect(try await client.get("/v1/vendors/v-nul", token: harness.admin).status == 404)
        let nulInPath = try await client.get("/v1/vendors/abc%00", token: harness.admin)
        #expect(nulInPath.status == 400)
        #expect(nulInPath.errorCode == "INVALID_CHARACTER")
    }

    @Test("photo proof: a prepaid order needing it is not delivered without; images only; size-limited")
    func photoProof() async throws {
        let harness = try await OrderHarness.get()
        let order = try await harness.readyOrder(requiresPhotoProof: true)
        #expect(try await harness.post("/v1/orders/\(order.id)/pickup", harness.rider).status == 200)
        let refused = try await harness.post("/v1/orders/\(order.id)/deliver", harness.rider)
        #expect(refused.status == 422)
        #expect(refused.errorCode == "PROOF_PHOTO_REQUIRED")
        let notImage = try await harness.client.request(
            .POST, "/v1/orders/\(order.id)/proof-photo", token: harness.rider, body: Data("hello".utf8),
            contentType: "image/png"
        )
        #expect(notImage.status == 415)
        let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 7, count: 100))
        let tooLarge = try await harness.client.request(
            .POST, "/v1/orders/\(order.id)/proof-photo", token: harness.rider, body: png + Data(count: 70_000),
            contentType: "image/png"
        )
        #expect(tooLarge.status == 413)
        let otherRider = try await harness.client.request(
            .POST, "/v1/orders/\(order.id)/proof-photo", token: harness.otherRider, body: png, contentType: "image/png"
        )
        #expect(otherRider.errorCode == "NOT_ASSIGNED_RIDER")
        // Who may upload is checked before the body is read: a stranger's oversized body is 403, not 413.
        let strangerOversized = try await harness.client.request(
            .POST, "/v1/orders/\(order.id)/proof-photo", token: harness.otherRider, body: png + Data(count: 70_000),
            contentType: "image/png"
        )
        #expect(strangerOversized.status == 403)
        #expect(strangerOversized.errorCode == "NOT_ASSIGNED_RIDER")
        let uploaded = try await harness.client.request(
            .POST, "/v1/orders/\(order.id)/proof-photo", token: harness.rider, body: png, contentType: "image/png"
        )
        #expect(uploaded.status == 201, "\(uploaded.text)")
        #expect(try await harness.order(order.id).proofPhoto?.contentType == "image/png")
        #expect(try await harness.post("/v1/orders/\(order.id)/deliver", harness.rider).status == 200)

        let cash = try await harness.readyOrder(requiresPhotoProof: true, paymentMode: .cash)
        #expect(try await harness.post("/v1/orders/\(cash.id)/pickup", harness.rider).status == 200)
        #expect(try await harness.post("/v1/orders/\(cash.id)/deliver", harness.rider).status == 200)
    }

    @Test(
        "an accepted offer for a cancelled order is refused so Allocation can release the rider; re-assignment moves the order"
    )
    func assignments() async throws {
        let harness = try await OrderHarness.get()
        let cancelled = try await harness.createOrder()
        #expect(try await harness.post("/v1/orders/\(cancelled.id)/cancel", harness.customer).status == 200)
        try await harness.acceptOffer(orderId: cancelled.id, riderId: harness.riderId)
        // (Other order services under test share the broker and refuse offers for orders they do not know.)
        let refusals = try await publishedEvents(on: .ordersEvents, key: cancelled.id) { events in
            events.contains { $0.payload(as: RiderAssignmentRefused.self)?.orderStatus == .status(.cancelled) }
        }
        let refusal = try #require(
            refusals.compactMap { $0.payload(as: RiderAssignmentRefused.self) }.first {
                $0.orderStatus == .status(.cancelled)
            })
        #expect(refusal.orderStatus == .status(.cancelled))
        #expect(refusal.riderId == harness.riderId)
        #expect(try await harness.order(cancelled.id).rider == nil)

        let order = try await harness.readyOrder(arrived: true)
        let newRider = uniqueName("rider")
        try await harness.acceptOffer(orderId: order.id, riderId: newRider, riderName: "Ria")
        try await eventually(timeout: .seconds(30), "the re-assignment") {
            try await harness.order(order.id).rider?.id == newRider
        }
        let reassigned = try await harness.order(order.id)
        #expect(reassigned.riderArrivedAt == nil)
        #expect(
            try await harness.post("/v1/orders/\(order.id)/arrived", harness.rider).errorCode == "NOT_ASSIGNED_RIDER")
        let log = try await harness.client.get("/v1/orders/\(order.id)/events", token: harness.admin).text
        #expect(log.contains("\"RiderReassigned\""))
    }

    @Test("service requests: created, assigned, on the way, in progress, completed, by the right people only")
    func serviceRequests() async throws {
        let harness = try await OrderHarness.get()
        let technicianId = uniqueName("tech")
        let technician = try await TestAuth.token(technicianId, .technician, name: "Tara")
        let created = try await harness.client.post(
            "/v1/service-requests", token: harness.customer,
            raw:
                #"{"serviceAddress":{"line1":"4 Lake View","area":"Koramangala","lat":12.93,"lng":77.62},"description":"AC not cooling"}"#
        )
        #expect(created.status == 201, "\(created.text)")
        let request = try created.decode(ServiceRequestView.self)
        #expect(request.status == .requested)
        let assign = #"{"technicianId":"\#(technicianId)","technicianName":"Tara"}"#
        #expect(
            try await harness.client.post(
                "/v1/service-requests/\(request.id)/assign", token: harness.customer, raw: assign
            ).status == 403)
        #expect(
            try await harness.client.post(
                "/v1/service-requests/\(request.id)/assign", token: harness.admin, raw: assign
            ).status == 200)
        let skip = try await harness.client.post(
            "/v1/service-requests/\(request.id)/status", token: technician, raw: #"{"status":"Completed"}"#)
        #expect(skip.status == 409)
        #expect(skip.errorCode == "SERVICE_REQUEST_STATE_CONFLICT")
        #expect(
            try await harness.client.post(
                "/v1/service-requests/\(request.id)/status", token: harness.otherRider, raw: #"{"status":"OnTheWay"}"#
            ).status == 403)
        for status in ["OnTheWay", "WorkInProgress", "Completed"] {
            let answer = try await harness.client.post(
                "/v1/service-requests/\(request.id)/status", token: technician, raw: #"{"status":"\#(status)"}"#)
            #expect(answer.status == 200, "\(status): \(answer.text)")
        }
        #expect(
            try await harness.client.get("/v1/service-requests/\(request.id)", token: technician).decode(
                ServiceRequestView.self
            ).status == .completed)
        #expect(
            try await harness.client.get("/v1/service-requests/\(request.id)", token: harness.otherRider).status == 403)
        let events = try await publishedEvents(on: .ordersEvents, key: request.id) { events in
            events.compactMap { $0.payload(as: ServiceRequestStatusChanged.self) }.contains { $0.status == .completed }
        }
        #expect(events.map(\.header.type).first == ServiceRequestCreated.eventType)
    }

    @Test("the /orders stream: the vendor's dashboard and the customer see the pickup live")
    func liveStream() async throws {
        let harness = try await OrderHarness.get()
        let order = try await harness.readyOrder()
        let url =
            "ws://127.0.0.1:\(harness.client.baseURL.split(separator: ":").last!)/socket.io/?EIO=4&transport=websocket"
        try await withTestWebSocket(url) { socket in
            _ = try await socket.next()
            socket.send(#"40/orders,{"token":"\#(harness.vendor)"}"#)
            #expect(try await socket.next().textContent?.hasPrefix("40/orders,") == true)
            #expect(try await harness.post("/v1/orders/\(order.id)/pickup", harness.rider).status == 200)
            while true {
                guard case .text(let text) = try await socket.next(timeout: .seconds(20)) else {
                    throw ProtocolError("closed")
                }
                if text.contains(order.id), text.contains("OrderPickedUp") {
                    #expect(text.hasPrefix(#"42/orders,["order_update","#))
                    #expect(text.contains(#""status":"InTransit""#))
                    break
                }
            }
        }
        try await withTestWebSocket(url) { socket in
            _ = try await socket.next()
            socket.send(#"40/orders,{"token":"forged"}"#)
            #expect(try await socket.next().textContent?.hasPrefix("44/orders,") == true)
        }
    }
}

struct ProtocolError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

enum PostgresQueryBuilder {
    static func unsafe(_ sql: String) -> PostgresQuery { PostgresQuery(unsafeSQL: sql) }
}

@Suite("Pickup saga deadlines on a stepped clock", .serialized, .timeLimit(.minutes(3)))
struct PickupSagaDeadlineTests {
    @Test("a stalled saga step is republished with its original event id")
    func stalledSagaRepublished() async throws {
        let harness = try await OrderHarness.getStepped()
        let order = try await harness.readyOrder()
        #expect(try await harness.post("/v1/orders/\(order.id)/pickup", harness.rider).status == 200)
        // Over three checks (every 300 ms) before the step time-out: nothing is republished yet.
        try await Task.sleep(for: .seconds(1))
        #expect(
            try await harness.client.get("/v1/orders/\(order.id)/saga", token: harness.admin).decode(
                PickupSagaView.self
            ).republishCount == 0)
        harness.clock.advance(by: OrderHarness.stepPastSagaTimeout)
        try await eventually(timeout: .seconds(20), "a republish") {
            try await harness.client.get("/v1/orders/\(order.id)/saga", token: harness.admin).decode(
                PickupSagaView.self
            ).republishCount >= 1
        }
        let saga = try await harness.client.get("/v1/orders/\(order.id)/saga", token: harness.admin).decode(
            PickupSagaView.self)
        let events = try await publishedEvents(on: .ordersEvents, key: order.id) { events in
            events.filter { $0.header.type == OrderPickedUp.eventType }.count >= 2
        }
        let ids = Set(
            events.filter { $0.header.type == OrderPickedUp.eventType }.map {
                $0.header.eventId.uuidString.lowercased()
            })
        #expect(ids == [saga.pickupEventId])
    }

    @Test("a saga whose steps never report ends failed after SAGA_MAX_REPUBLISHES and is not republished again")
    func sagaGivesUp() async throws {
        let harness = try await OrderHarness.getStepped()
        let order = try await harness.readyOrder()
        #expect(try await harness.post("/v1/orders/\(order.id)/pickup", harness.rider).status == 200)
        func saga() async throws -> PickupSagaView {
            try await harness.client.get("/v1/orders/\(order.id)/saga", token: harness.admin).decode(
                PickupSagaView.self)
        }
        for republishes in 1...OrderHarness.sagaMaximumRepublishes {
            harness.clock.advance(by: OrderHarness.stepPastSagaTimeout)
            try await eventually(timeout: .seconds(20), "republish \(republishes)") {
                try await saga().republishCount == republishes
            }
        }
        harness.clock.advance(by: OrderHarness.stepPastSagaTimeout)
        try await eventually(timeout: .seconds(20), "the saga failed") { try await saga().status == .failed }
        let failed = try await saga()
        #expect(failed.republishCount == OrderHarness.sagaMaximumRepublishes)
        #expect(failed.failure?.contains("tracking started") == true, "\(failed)")
        #expect(!failed.completed)
        // Past another step time-out, over three checks (every 300 ms): nothing more is republished.
        harness.clock.advance(by: OrderHarness.stepPastSagaTimeout)
        try await Task.sleep(for: .seconds(1))
        #expect(try await saga().republishCount == OrderHarness.sagaMaximumRepublishes)
    }
}
