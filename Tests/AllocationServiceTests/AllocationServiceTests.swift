import AllocationService
import Contracts
import Foundation
import Kafka
import PostgresNIO
import Realtime
import RealtimeTesting
import ServiceKit
import TestSupport
import Testing

/// One allocation service for a suite, on a broker of its own: the order service of a parallel suite would
/// otherwise refuse these tests' accepted offers for orders it never saw, releasing their riders. The shared one has
/// short deadlines (offers last 4 s, a receipt is due within 2 s) that no test waits for; the stepped one has the
/// default deadlines and a clock its tests step past them.
struct AllocationHarness: Sendable {
    static let settings = [
        "OFFER_TIMEOUT_SECONDS": "4", "OFFER_RECEIPT_TIMEOUT_SECONDS": "2", "ALLOCATION_TICK_MS": "100",
        "ALLOCATION_RETRY_INITIAL_MS": "200", "ALLOCATION_RETRY_MAX_SECONDS": "5",
    ]
    let client: ServiceClient
    let schema: String
    let broker: TansuBroker
    let settings: [String: String]
    /// The base URL of the service's clock control (a ``SteppedClock``).
    let clockURL: String

    static func start(brokerPort: Int, settings: [String: String]) async throws -> AllocationHarness {
        let schema = uniqueName("allocation")
        let broker = TansuBroker(port: brokerPort)
        try await broker.start()
        let clock = SteppedClock()
        let clockURL = try await clock.serveControl()
        let client = try await startSuiteService(
            AllocationService.self, schema: schema, brokers: broker.address, extra: settings, now: clock.now)
        return AllocationHarness(
            client: client, schema: schema, broker: broker, settings: settings, clockURL: clockURL)
    }

    private static let shared = SuiteShared { try await start(brokerPort: 19110, settings: settings) }

    private static let stepped = SuiteShared {
        try await start(
            brokerPort: 19114,
            settings: settings.merging(Self.steppedSettings) { $1 })
    }

    /// The stepped service's deadlines; fixes may be an hour old, since the riders' apps stamp them with the
    /// machine's time and every step puts the service's clock further ahead of it. No notification service runs
    /// here: a rider without a socket is decided by the fallback deadline, with no grace past the receipt window.
    static let steppedSettings = [
        "OFFER_TIMEOUT_SECONDS": "60", "OFFER_RECEIPT_TIMEOUT_SECONDS": "10", "OFFER_PUSH_GRACE_SECONDS": "0",
        "PRECISE_LOCATION_MAX_AGE_SECONDS": "3600",
    ]

    /// A service whose deadlines pass only when a test steps its clock (its tests run one at a time).
    static func getStepped() async throws -> AllocationHarness { try await stepped.get() }

    static func get() async throws -> AllocationHarness { try await shared.get() }

    /// Runs a scenario of rider_scenarios.py around a fresh spot with riders `riders` (names) and a fresh order.
    func scenario(_ name: String, riders: [String], extra: [String: String] = [:]) async throws -> JSONValue {
        let spot = TestSpot()
        let customerId = uniqueName("customer")
        var config = [
            "url": client.baseURL, "brokers": broker.address, "lat": String(spot.lat), "lng": String(spot.lng),
            "clockUrl": clockURL, "offerTimeoutSeconds": settings["OFFER_TIMEOUT_SECONDS"] ?? "",
            "receiptTimeoutSeconds": settings["OFFER_RECEIPT_TIMEOUT_SECONDS"] ?? "",
            "orderId": UUID().uuidString.lowercased(), "customerId": customerId,
            "customerToken": try await TestAuth.token(customerId, .customer),
        ]
        for rider in riders {
            let riderId = uniqueName("rider")
            config["\(rider)Id"] = riderId
            config["\(rider)Token"] = try await TestAuth.token(riderId, .rider, name: "Rider \(rider)")
        }
        config.merge(extra) { _, new in new }
        let json = String(decoding: try JSONEncoder().encode(config), as: UTF8.self)
        return try await runPythonScenario("python/rider_scenarios.py", [name, json])
    }
}

/// A rider's availability request.
struct AvailabilityBody: Encodable {
    struct Location: Encodable {
        var lat: Double
        var lng: Double
        var accuracyMeters: Double
        var recordedAt: Date
    }

    var status: String
    var location: Location?

    static func online(at point: (lat: Double, lng: Double), accuracy: Double = 8, age: TimeInterval = 1)
        -> AvailabilityBody
    {
        AvailabilityBody(
            status: "online",
            location: Location(
                lat: point.lat, lng: point.lng, accuracyMeters: accuracy, recordedAt: Date().addingTimeInterval(-age))
        )
    }
}

extension ServiceClient {
    func setAvailability(_ body: AvailabilityBody, token: String?) async throws -> Answer {
        try await request(.PUT, "/v1/riders/me/availability", token: token, body: try ContractCoding.encode(body))
    }
}

func code(_ answer: JSONValue?) -> String? { answer?["body"]?["error"]?["code"]?.stringValue }
func status(_ answer: JSONValue?) -> Double? { answer?["status"]?.doubleValue }
func eventTypes(_ events: JSONValue?) -> [String] { events?.arrayValue.compactMap { $0["type"]?.stringValue } ?? [] }

@Suite("Allocation service (RDR-010, RDR-020)", .timeLimit(.minutes(3)))
struct AllocationServiceTests {
    @Test(
        "the nearest rider gets the offer (socket and push) and accepts it; the rider is on the delivery until it ends")
    func offerAndAccept() async throws {
        let harness = try await AllocationHarness.get()
        let result = try await harness.scenario("accept", riders: ["near", "far"])
        #expect(result["customer_refused"]?.stringValue != nil, "a customer joined /rider")
        #expect(status(result["near_online"]) == 200)
        let offer = try #require(result["offer"]?[0], "no offer: \(result)")
        #expect(result["offer"]?.arrayValue.count == 1)
        #expect(offer["vendor"]?["name"]?.stringValue == "Spice Route")
        #expect(offer["vendor"]?["address"]?.stringValue == "12 MG Road, Indiranagar")
        #expect(offer["deliveryArea"]?.stringValue == "Koramangala")
        #expect(!offer.serialized.contains("Lake View"), "the customer's address reached the rider: \(offer)")
        #expect(abs((offer["distanceKm"]?.doubleValue ?? 0) - 1) < 0.11)
        #expect(abs((offer["tripDistanceKm"]?.doubleValue ?? 0) - 4) < 0.11)
        // ₹25 + ₹10/km over 1 km to the vendor and 3 km to the customer.
        #expect(offer["earnings"]?["amount"]?.doubleValue == 65)
        #expect(offer["earnings"]?["currency"]?.stringValue == "INR")
        #expect(offer["timeoutSeconds"]?.doubleValue == 4)
        #expect(offer["expiresAt"]?.stringValue != nil)
        #expect(result["receipt_ack"]?["offerId"] == offer["offerId"])
        #expect(result["bad_receipt"]?["error"]?["code"]?.stringValue == "VALIDATION_FAILED")
        #expect(result["near_pending"]?["body"]?["offerId"] == offer["offerId"])
        #expect(code(result["far_pending"]) == "NO_ACTIVE_OFFER")
        #expect(status(result["far_accepts_near_offer"]) == 404)
        #expect(result["accepted"]?["body"]?["status"]?.stringValue == "accepted")
        #expect(result["accepted_again_same_key"]?["body"] == result["accepted"]?["body"])
        #expect(code(result["accepted_again"]) == "OFFER_NOT_PENDING")
        #expect(result["near_after_accept"]?["status"]?.stringValue == "delivering")
        #expect(code(result["offline_on_delivery"]) == "RIDER_ON_DELIVERY")
        #expect(result["far_offers"]?.arrayValue.isEmpty == true)
        #expect(eventTypes(result["events"]) == ["OfferSent", "OfferAccepted"])
        #expect(result["events"]?[1]?["payload"]?["rider"]?["name"]?.stringValue == "Rider near")
        let push = try #require(result["push"]?.arrayValue.last?["payload"])
        #expect(push["title"]?.stringValue == "New delivery offer")
        #expect(push["body"]?.stringValue == "New delivery offer! Earn an estimated ₹65.")
        #expect(push["priority"]?.stringValue == "high")
        #expect(push["sound"]?.stringValue == "offer_alert")
        #expect(push["ttlSeconds"]?.doubleValue == 4)
        #expect(push["data"]?["link"]?.stringValue == "app://offers/\(offer["offerId"]?.stringValue ?? "")")
        #expect(result["near_after_delivery"]?["status"]?.stringValue == "online")
    }

    @Test("two orders ready at once are never offered to one rider together")
    func oneOfferAtATime() async throws {
        let harness = try await AllocationHarness.get()
        let result = try await harness.scenario(
            "one_at_a_time", riders: ["near", "far"], extra: ["secondOrderId": UUID().uuidString.lowercased()])
        let near = result["near_offers"]?.arrayValue ?? []
        let far = result["far_offers"]?.arrayValue ?? []
        #expect(near.count == 1, "\(result)")
        #expect(far.count == 1, "\(result)")
        #expect(near.first?["orderId"] != far.first?["orderId"])
        #expect(result["near_pending"]?["body"]?["offerId"] == near.first?["offerId"])
    }

    @Test("the database refuses a second pending offer for a rider, whatever the code does")
    func databaseEnforcesOneOffer() async throws {
        let harness = try await AllocationHarness.get()
        let riderId = uniqueName("rider")
        let (first, second) = (uniqueName("order"), uniqueName("order"))
        let refused = try await withTestDatabase(schema: harness.schema, migrations: []) { database in
            try await database.transaction { connection in
                try await connection.query(
                    "INSERT INTO riders (rider_id, name, status) VALUES (\(riderId), 'R', 'offered')",
                    logger: database.logger)
                for orderId in [first, second] {
                    try await connection.query(
                        """
                        INSERT INTO allocations (order_id, customer_id, vendor_name, vendor_address, vendor_lat, vendor_lng, delivery_area,
                                                 delivery_lat, delivery_lng, status)
                        VALUES (\(orderId), 'c', 'v', 'a', 0, 0, 'area', 0, 0, 'searching')
                        """, logger: database.logger
                    )
                }
            }
            let insert = { @Sendable (orderId: String) async throws in
                try await database.transaction { connection in
                    _ = try await connection.query(
                        """
                        INSERT INTO offers (offer_id, order_id, rider_id, status, distance_km, earnings, expires_at, receipt_deadline,
                                            received_at)
                        VALUES (\(UUID()), \(orderId), \(riderId), 'pending', 1, 30, now() + interval '1 minute',
                                now() + interval '1 minute', now())
                        """, logger: database.logger
                    )
                }
            }
            try await insert(first)
            do {
                try await insert(second)
                return false
            } catch let error as PSQLError {
                return error.serverInfo?[.constraintName] == "offers_one_pending_per_rider"
            }
        }
        #expect(refused)
    }

    @Test("a cancelled order's pending offer is rescinded; the rider is online again")
    func rescindOnCancel() async throws {
        let harness = try await AllocationHarness.get()
        let result = try await harness.scenario("rescind", riders: ["near"])
        #expect(result["rescinded"]?[0]?["message"]?.stringValue == "This offer is no longer available")
        #expect(code(result["accept_after_rescind"]) == "OFFER_RESCINDED")
        #expect(result["rider_after"]?["status"]?.stringValue == "online")
        #expect(code(result["pending_after"]) == "NO_ACTIVE_OFFER")
    }

    @Test("with nobody eligible AllocationFailed is published and a rider who comes online later gets the order")
    func nobodyEligibleThenLaterRider() async throws {
        let harness = try await AllocationHarness.get()
        let result = try await harness.scenario("later_rider", riders: ["near"])
        #expect(eventTypes(result["events"]).first == "AllocationFailed")
        #expect(status(result["online"]) == 200)
        #expect(result["offer"]?.arrayValue.count == 1)
    }

    @Test("going online needs a precise, fresh fix (RDR-020); otherwise 422 and the rider stays offline")
    func preciseLocationRequired() async throws {
        let client = try await AllocationHarness.get().client
        let token = try await TestAuth.token(uniqueName("rider"), .rider)
        let spot = TestSpot().north(0)
        for body in [
            AvailabilityBody.online(at: spot, accuracy: 120), .online(at: spot, age: 600), .online(at: spot, age: -300),
            AvailabilityBody(status: "online"),
        ] {
            let answer = try await client.setAvailability(body, token: token)
            #expect(answer.status == 422)
            #expect(answer.errorCode == "PRECISE_LOCATION_REQUIRED")
        }
        #expect(try await client.get("/v1/riders/me", token: token).decode(RiderView.self).status.rawValue == "offline")
        let online = try await client.setAvailability(.online(at: spot, accuracy: 50), token: token)
        #expect(online.status == 200)
        #expect(try online.decode(RiderView.self).status.rawValue == "online")
        let offline = try await client.setAvailability(AvailabilityBody(status: "offline"), token: token)
        #expect(try offline.decode(RiderView.self).status.rawValue == "offline")
    }

    @Test("operators list the riders on duty with their fix; offline riders are left out; only admins may")
    func ridersOnDuty() async throws {
        let client = try await AllocationHarness.get().client
        let (onDuty, offDuty) = (uniqueName("rider"), uniqueName("rider"))
        let spot = TestSpot().north(0)
        #expect(
            try await client.setAvailability(.online(at: spot), token: try await TestAuth.token(onDuty, .rider)).status
                == 200)
        let offToken = try await TestAuth.token(offDuty, .rider)
        #expect(try await client.setAvailability(.online(at: spot), token: offToken).status == 200)
        #expect(try await client.setAvailability(AvailabilityBody(status: "offline"), token: offToken).status == 200)
        let admin = try await TestAuth.token(uniqueName("admin"), .admin)
        let listed = try await client.get("/v1/riders/on-duty?limit=1000", token: admin).decode(OnDutyRiders.self)
            .riders
        let rider = try #require(listed.first { $0.riderId == onDuty })
        #expect(rider.status.rawValue == "online")
        #expect(abs((rider.location?.lat ?? 0) - spot.lat) < 1e-9)
        #expect(!listed.contains { $0.riderId == offDuty })
        #expect(
            try await client.get("/v1/riders/on-duty", token: try await TestAuth.token(onDuty, .rider)).status == 403)
        #expect(try await client.get("/v1/riders/on-duty?limit=0", token: admin).errorCode == "VALIDATION_FAILED")
    }

    @Test("positions from couriers.positions move an online rider; older ones are ignored")
    func positionsMoveRiders() async throws {
        let harness = try await AllocationHarness.get()
        let client = harness.client
        let riderId = uniqueName("rider")
        let token = try await TestAuth.token(riderId, .rider)
        let spot = TestSpot()
        #expect(try await client.setAvailability(.online(at: spot.north(0), age: 5), token: token).status == 200)
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                client: KafkaClientConfiguration(
                    bootstrapServers: [harness.broker.address], clientId: "allocation-tests")
            ),
            logger: TestInfrastructure.logger("allocation-tests")
        )
        for (kilometres, age) in [(2.0, 0.0), (1.0, 3.0)] {
            let point = spot.north(kilometres)
            let position = PositionUpdated(
                courierId: riderId, role: .rider, lat: point.lat, lng: point.lng, accuracyMeters: 5,
                headingDegrees: nil, speedMps: 4,
                recordedAt: Date().addingTimeInterval(-age)
            )
            let envelope = EventEnvelope(aggregateId: riderId, occurredAt: Date(), payload: position)
            try await producer.send(
                topic: Topic.couriersPositions.rawValue, key: riderId, value: try ContractCoding.encode(envelope))
        }
        try await eventually(timeout: .seconds(20), "the rider moved 2 km north") {
            let rider = try await client.get("/v1/riders/me", token: token).decode(RiderView.self)
            return abs((rider.location?.lat ?? 0) - spot.north(2).lat) < 1e-9
        }
        try await Task.sleep(for: .milliseconds(500))
        let rider = try await client.get("/v1/riders/me", token: token).decode(RiderView.self)
        #expect(abs((rider.location?.lat ?? 0) - spot.north(2).lat) < 1e-9, "an older position moved the rider back")
        await producer.close()
    }

    @Test("bad ids, wrong roles, missing tokens and malformed bodies get their 4xx and code")
    func badRequests() async throws {
        let client = try await AllocationHarness.get().client
        let rider = try await TestAuth.token(uniqueName("rider"), .rider)
        let customer = try await TestAuth.token(uniqueName("customer"), .customer)
        let spot = TestSpot().north(0)
        #expect(try await client.setAvailability(.online(at: spot), token: nil).status == 401)
        let wrongRole = try await client.setAvailability(.online(at: spot), token: customer)
        #expect(wrongRole.status == 403)
        #expect(wrongRole.errorCode == "FORBIDDEN")
        #expect(try await client.get("/v1/riders/me/offer", token: customer).errorCode == "FORBIDDEN")
        let malformed = try await client.request(
            .PUT, "/v1/riders/me/availability", token: rider, body: Data("{\"status\":".utf8))
        #expect(malformed.status == 400)
        #expect(malformed.errorCode != nil)
        let unknownStatus = try await client.request(
            .PUT, "/v1/riders/me/availability", token: rider, body: Data(#"{"status":"flying"}"#.utf8))
        #expect(unknownStatus.status == 400)
        let outOfRange = try await client.setAvailability(.online(at: (lat: 95, lng: 10)), token: rider)
        #expect(outOfRange.status == 400)
        #expect(outOfRange.errorCode == "VALIDATION_FAILED")
        // A negative accuracy is no fix at all, not a precise one.
        for accuracy in [-1, -1e308] {
            let negative = try await client.setAvailability(.online(at: spot, accuracy: accuracy), token: rider)
            #expect(negative.status == 400, "accuracy \(accuracy)")
            #expect(negative.errorCode == "VALIDATION_FAILED", "accuracy \(accuracy)")
        }
        #expect(try await client.get("/v1/riders/me/offer", token: rider).errorCode == "NO_ACTIVE_OFFER")
        for path in [
            "/v1/offers/not-an-id/accept", "/v1/offers/\(UUID())/accept", "/v1/offers/\(UUID())/reject",
            "/v1/offers/\(UUID())/received",
        ] {
            let answer = try await client.request(.POST, path, token: rider)
            #expect(answer.status == 404, "\(path)")
            #expect(answer.errorCode == "NOT_FOUND", "\(path)")
        }
        #expect(try await client.request(.POST, "/v1/offers/\(UUID())/accept", token: customer).status == 403)
        let longKey = try await client.request(
            .POST, "/v1/offers/\(UUID())/accept", token: rider,
            headers: ["Idempotency-Key": String(repeating: "k", count: 300)]
        )
        #expect(longKey.status == 400)
    }
}

@Suite("Allocation deadlines end to end, on a stepped clock", .serialized, .timeLimit(.minutes(3)))
struct AllocationSteppedDeadlineTests {
    @Test("a rejected offer and an expired one go to the next nearest rider; answers after that are refused")
    func rejectionAndExpiry() async throws {
        let harness = try await AllocationHarness.getStepped()
        let result = try await harness.scenario("reassign", riders: ["near", "middle", "far"])
        #expect(result["rejected"]?["body"]?["status"]?.stringValue == "rejected")
        #expect(code(result["rejected_then_accepted"]) == "OFFER_NOT_PENDING")
        #expect(result["middle_offer"]?.arrayValue.count == 1)
        #expect(result["middle_expired_early"]?.arrayValue.isEmpty == true, "the offer expired before its deadline")
        #expect(result["middle_expired"]?[0]?["reason"]?.stringValue == "timed_out")
        #expect(result["middle_after_expiry"]?["status"]?.stringValue == "online")
        #expect(code(result["expired_then_accepted"]) == "OFFER_EXPIRED")
        #expect(result["far_accepted"]?["body"]?["status"]?.stringValue == "accepted")
        #expect(result["near_offers"]?.arrayValue.count == 1, "a rider who declined was offered the order again")
        #expect(result["middle_offers"]?.arrayValue.count == 1, "a rider who timed out was offered the order again")
        let events = result["events"]?.arrayValue ?? []
        #expect(
            eventTypes(result["events"]) == [
                "OfferSent", "OfferRejected", "OfferSent", "OfferRejected", "OfferSent", "OfferAccepted",
            ])
        #expect(events.compactMap { $0["payload"]?["reason"]?.stringValue } == ["rejected", "timed_out"])
    }

    @Test(
        "a rider whose app never confirms the offer (and whose push is never reported) is recorded unreachable once the receipt time passes; the next rider gets it"
    )
    func unreachableRiderSkipped() async throws {
        let harness = try await AllocationHarness.getStepped()
        let result = try await harness.scenario("unreachable", riders: ["near", "far"])
        #expect(
            result["offer_before_receipt_deadline"]?.arrayValue.isEmpty == true,
            "the next rider was asked before the receipt time passed")
        // Stepped past the receipt time (10 s), not the offer's (60 s): the receipt deadline decided.
        #expect(result["offer"]?.arrayValue.count == 1, "\(result)")
        #expect(result["silent_after"]?["status"]?.stringValue == "offline")
        let reasons = result["events"]?.arrayValue.compactMap { $0["payload"]?["reason"]?.stringValue }
        #expect(reasons == ["unreachable"])
    }
}

@Suite("Allocation deadlines survive a restart", .timeLimit(.minutes(3)))
struct AllocationRestartTests {
    @Test(
        "an offer whose deadline passed while the service was down expires when it is back; the next rider gets the order"
    )
    func expiryAfterRestart() async throws {
        let schema = uniqueName("allocation")
        let extra = [
            "OFFER_TIMEOUT_SECONDS": "60", "OFFER_RECEIPT_TIMEOUT_SECONDS": "60", "ALLOCATION_TICK_MS": "100",
            "PRECISE_LOCATION_MAX_AGE_SECONDS": "3600",
        ]
        let clock = SteppedClock()
        let spot = TestSpot()
        let (nearId, farId) = (uniqueName("rider"), uniqueName("rider"))
        let near = try await TestAuth.token(nearId, .rider)
        let far = try await TestAuth.token(farId, .rider)
        let orderId = UUID().uuidString.lowercased()
        func application() async throws -> ServiceApplication {
            let environment = try testServiceEnvironment(schema: schema, extra: extra)
            return try await AllocationService.buildApplication(
                configuration: try AllocationService.configuration(environment: environment), environment: environment,
                logger: TestInfrastructure.logger("allocation-service"), now: clock.now
            )
        }
        let offer = try await withRunningService(try await application()) { client in
            try await eventually(timeout: .seconds(30), "ready") { (try? await client.get("/ready").status) == 200 }
            #expect(try await client.setAvailability(.online(at: spot.north(1)), token: near).status == 200)
            #expect(try await client.setAvailability(.online(at: spot.north(2)), token: far).status == 200)
            let producer = try KafkaProducer(
                configuration: KafkaProducerConfiguration(
                    client: KafkaClientConfiguration(
                        bootstrapServers: [try TestInfrastructure.kafkaBrokers()], clientId: "allocation-tests")
                ),
                logger: TestInfrastructure.logger("allocation-tests")
            )
            let vendor = VendorRef(
                id: "vendor-1", name: "Spice Route",
                address: Address(line1: "12 MG Road", area: "Indiranagar", lat: spot.lat, lng: spot.lng))
            let ready = OrderReadyForPickup(
                orderId: orderId, customerId: uniqueName("customer"), vendor: vendor, deliveryArea: "Koramangala",
                deliveryLocation: GeoPoint(lat: spot.lat - 0.02, lng: spot.lng), totalAmount: 100
            )
            try await producer.send(
                topic: Topic.ordersEvents.rawValue, key: orderId,
                value: try ContractCoding.encode(
                    EventEnvelope(aggregateId: orderId, occurredAt: Date(), payload: ready))
            )
            await producer.close()
            var offer: OfferView?
            try await eventually(timeout: .seconds(30), "the near rider's offer") {
                offer = try? await client.get("/v1/riders/me/offer", token: near).decode(OfferView.self)
                return offer != nil
            }
            return try #require(offer)
        }
        // Down while the deadline passes.
        clock.advance(by: .seconds(61))
        try await withRunningService(try await application()) { client in
            var farOffer: OfferView?
            try await eventually(timeout: .seconds(30), "the far rider's offer after the restart") {
                farOffer = try? await client.get("/v1/riders/me/offer", token: far).decode(OfferView.self)
                return farOffer != nil
            }
            #expect(farOffer?.orderId == orderId)
            let late = try await client.request(.POST, "/v1/offers/\(offer.offerId)/accept", token: near)
            #expect(late.errorCode == "OFFER_EXPIRED")
            #expect(
                try await client.get("/v1/riders/me", token: near).decode(RiderView.self).status.rawValue == "online")
        }
    }
}
