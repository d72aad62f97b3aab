import Contracts
import Foundation
import Testing

@Suite("Event contracts")
struct EventRoundTripTests {
    static let vendor = VendorRef(
        id: "v-1", name: "Spice Route",
        address: Address(line1: "12 MG Road", area: "Indiranagar", lat: 12.97, lng: 77.64)
    )
    static let home = Address(line1: "4 Lake View", area: "Koramangala", lat: 12.93, lng: 77.62)
    static let rider = PersonRef(id: "r-1", name: "Ravi")
    static let date = Date(timeIntervalSince1970: 1_795_000_000.123)

    /// One example of every payload in the catalog.
    static let samples: [any EventPayload] = [
        OrderCreated(
            orderId: "o-1", customerId: "c-1", vendor: vendor, deliveryAddress: home, paymentMode: .prepaid,
            totalAmount: Decimal(string: "249.50")!, requiresPhotoProof: true
        ),
        OrderAccepted(orderId: "o-1", customerId: "c-1", vendorId: "v-1"),
        OrderReadyForPickup(
            orderId: "o-1", customerId: "c-1", vendor: vendor, deliveryArea: "Koramangala",
            deliveryLocation: home.point, totalAmount: 249.5
        ),
        RiderAssigned(orderId: "o-1", customerId: "c-1", vendorId: "v-1", offerId: "of-1", rider: rider),
        RiderReassigned(
            orderId: "o-1", customerId: "c-1", vendorId: "v-1", offerId: nil, rider: rider, previousRiderId: "r-0"
        ),
        RiderUnassigned(orderId: "o-1", customerId: "c-1", vendorId: "v-1", previousRiderId: "r-0"),
        RiderAssignmentRefused(orderId: "o-1", offerId: "of-1", riderId: "r-1", orderStatus: .status(.cancelled)),
        RiderAssignmentRefused(orderId: "o-1", offerId: nil, riderId: "r-2", orderStatus: .status(.inTransit)),
        RiderAssignmentRefused(orderId: "o-1", offerId: "of-2", riderId: "r-3", orderStatus: .noSuchOrder),
        RiderArrivedAtStore(orderId: "o-1", customerId: "c-1", vendorId: "v-1", riderId: "r-1"),
        OrderPickedUp(
            orderId: "o-1", customerId: "c-1", vendor: vendor, rider: rider, destination: home, pickedUpAt: date),
        OrderDelivered(orderId: "o-1", customerId: "c-1", vendorId: "v-1", riderId: "r-1", deliveredAt: date),
        OrderCancelled(
            orderId: "o-1", customerId: "c-1", vendorId: "v-1", riderId: nil, cancelledBy: .customer,
            reason: "changed my mind"),
        ServiceRequestCreated(requestId: "s-1", customerId: "c-1", serviceAddress: home, description: "AC service"),
        ServiceRequestAssigned(
            requestId: "s-1", customerId: "c-1", technician: PersonRef(id: "t-1", name: "Tara"), serviceAddress: home),
        ServiceRequestStatusChanged(
            requestId: "s-1", customerId: "c-1", technician: PersonRef(id: "t-1", name: "Tara"), status: .onTheWay,
            serviceAddress: home
        ),
        OfferSent(offerId: "of-1", orderId: "o-1", riderId: "r-1", expiresAt: date),
        OfferAccepted(offerId: "of-1", orderId: "o-1", rider: rider),
        OfferRejected(offerId: "of-1", orderId: "o-1", riderId: "r-1", reason: .timedOut),
        OperatorAssignedRider(orderId: "o-1", rider: rider, operatorId: "admin-1"),
        OperatorReleasedOrder(orderId: "o-1", riderId: "r-1", operatorId: "admin-1"),
        AllocationFailed(orderId: "o-1", attempt: 2, reason: "no rider within 5 km", nextAttemptAt: date),
        PositionUpdated(
            courierId: "r-1", role: .rider, lat: 12.9, lng: 77.6, accuracyMeters: 8, headingDegrees: 90, speedMps: nil,
            recordedAt: date
        ),
        TrackingStarted(jobId: "o-1", kind: .delivery, customerId: "c-1", courierId: "r-1", startedAt: date),
        TrackingStopped(
            jobId: "s-1", kind: .serviceRequest, customerId: "c-1", courierId: "t-1", reason: .timeLimit,
            stoppedAt: date),
        ChatMessageSent(
            messageId: "m-1", orderId: "o-1", senderId: "c-1", senderRole: .customer, senderName: "Asha",
            text: "Please leave it at the door \u{1F6AA}", clientMessageId: "cm-1", sentAt: date
        ),
        ChatAccessRevoked(orderId: "o-1", riderId: "r-1", revokedAt: date),
        ChatClosed(orderId: "o-1", reason: "OrderDelivered", closedAt: date),
        PushRequested(
            notificationId: "n-1", userId: "c-1", kind: "order_picked_up", title: "On the way",
            body: "Your order is on the way",
            data: ["link": "app://orders/o-1"], priority: .high, collapseKey: "o-1", ttlSeconds: 60, sound: "offer.wav",
            correlationId: "o-1"
        ),
        PushSent(
            notificationId: "n-1", userId: "c-1", kind: "order_picked_up", correlationId: "o-1", deviceCount: 2,
            sentAt: date),
        PushFailed(
            notificationId: "n-1", userId: "c-1", kind: "order_picked_up", correlationId: nil, reason: "no devices",
            failedAt: date),
    ]

    @Test("the samples cover every event type in the catalog")
    func samplesCoverCatalog() {
        let sampled = Set(Self.samples.map { type(of: $0).eventType })
        let catalogued = Set(EventCatalog.payloadTypes.map { $0.eventType })
        #expect(sampled == catalogued)
        #expect(catalogued.count == EventCatalog.payloadTypes.count, "two payload types share an event type")
    }

    @Test("every event survives encode and decode unchanged", arguments: samples.indices)
    func roundTrip(index: Int) throws {
        let decoded = try Self.roundTrip(Self.samples[index])
        #expect(decoded.matches)
    }

    private static func roundTrip<P: EventPayload>(_ payload: P) throws -> (matches: Bool, header: EventHeader) {
        let envelope = EventEnvelope(aggregateId: "agg-1", occurredAt: date, payload: payload)
        let data = try ContractCoding.encode(envelope)
        let decoded = try EventCatalog.decode(data)
        #expect(decoded.header.type == P.eventType)
        #expect(decoded.header.eventId == envelope.eventId)
        #expect(decoded.header.aggregateId == "agg-1")
        #expect(decoded.header.occurredAt == date)
        #expect(decoded.header.schemaVersion == P.schemaVersion)
        #expect(try ContractCoding.decode(EventEnvelope<P>.self, from: data) == envelope)
        return (decoded.payload(as: P.self) == payload, decoded.header)
    }

    @Test("dates are ISO-8601 UTC with milliseconds, and keys are sorted")
    func stableJSON() throws {
        let envelope = EventEnvelope(
            eventId: UUID(uuidString: "00000000-0000-0000-0000-000000000001")!, aggregateId: "o-1",
            occurredAt: Self.date,
            payload: OrderAccepted(orderId: "o-1", customerId: "c-1", vendorId: "v-1")
        )
        let text = String(decoding: try ContractCoding.encode(envelope), as: UTF8.self)
        #expect(
            text
                == #"{"aggregateId":"o-1","eventId":"00000000-0000-0000-0000-000000000001","occurredAt":"2026-11-18T11:06:40.123Z","payload":{"customerId":"c-1","orderId":"o-1","vendorId":"v-1"},"schemaVersion":1,"type":"OrderAccepted"}"#
        )
    }

    @Test("vocabularies (push kinds, error codes) travel as plain strings, and unknown ones are kept")
    func vocabulariesArePlainStrings() throws {
        let push = PushRequested(
            notificationId: "n-1", userId: "c-1", kind: .orderPickedUp, title: "On the way", body: "Your order",
            data: [:], priority: .high)
        let json = String(decoding: try ContractCoding.encode(push), as: UTF8.self)
        #expect(json.contains(#""kind":"order_picked_up""#), "\(json)")
        let custom = try ContractCoding.decode(
            PushRequested.self, from: Data(json.replacingOccurrences(of: "order_picked_up", with: "promo").utf8))
        #expect(custom.kind == PushKind("promo"))
        #expect(String(decoding: try ContractCoding.encode([ErrorCode.notFound]), as: UTF8.self) == #"["NOT_FOUND"]"#)
    }

    @Test("a refusal's order state travels as the status's string or Unknown, and any other string is refused")
    func refusedOrderStateWire() throws {
        let states: [RefusedOrderState] = OrderStatus.allCases.map { .status($0) } + [.noSuchOrder]
        let json = String(decoding: try ContractCoding.encode(states), as: UTF8.self)
        #expect(
            json
                == #"["PendingVendorAcceptance","Preparing","ReadyForPickup","InTransit","Delivered","Cancelled","Unknown"]"#
        )
        #expect(try ContractCoding.decode([RefusedOrderState].self, from: Data(json.utf8)) == states)
        let refusal = #"{"orderId":"o-1","orderStatus":"Shipped","riderId":"r-1"}"#
        let error = #expect(throws: DecodingError.self) {
            try ContractCoding.decode(RiderAssignmentRefused.self, from: Data(refusal.utf8))
        }
        guard case .dataCorrupted? = error else {
            Issue.record("expected dataCorrupted, got \(String(describing: error))")
            return
        }
    }

    @Test("dates without fractional seconds are accepted")
    func datesWithoutFraction() throws {
        let json = #"{"orderId":"o-1","riderId":"r-1","offerId":"of-1","expiresAt":"2026-11-21T10:15:00Z"}"#
        let offer = try ContractCoding.decode(OfferSent.self, from: Data(json.utf8))
        #expect(offer.expiresAt == Date(timeIntervalSince1970: 1_795_256_100))
    }

    @Test(
        "timestamps parse with or without fraction and with offsets",
        arguments: [
            ("2026-11-21T10:15:00Z", 1_795_256_100_000), ("2026-11-21T10:15:00.5Z", 1_795_256_100_500),
            ("2026-11-21T10:15:00.123456Z", 1_795_256_100_123), ("2026-11-21T15:45:00+05:30", 1_795_256_100_000),
            ("2026-11-21T05:15:00-05:00", 1_795_256_100_000),
        ] as [(String, Int64)]
    )
    func timestampParsing(text: String, milliseconds: Int64) {
        #expect(ISO8601.parse(text) == Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    @Test(
        "malformed timestamps are refused",
        arguments: [
            "", "2026-11-21", "2026-13-01T00:00:00Z", "2026-11-21T10:15:00", "2026-11-21T10:15:00.Z", "yesterday",
        ])
    func timestampRefusals(text: String) {
        #expect(ISO8601.parse(text) == nil)
    }

    @Test("formatting rounds to milliseconds and round-trips")
    func timestampFormatting() {
        let date = Date(timeIntervalSince1970: 1_795_256_100.1234)
        #expect(ISO8601.format(date) == "2026-11-21T10:15:00.123Z")
        #expect(ISO8601.format(Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59.500Z")
        #expect(ISO8601.parse(ISO8601.format(date)).map(ISO8601.format) == "2026-11-21T10:15:00.123Z")
        #expect(ISO8601.format(Date(timeIntervalSince1970: -62_135_596_800)) == "0001-01-01T00:00:00.000Z")
        #expect(ISO8601.format(Date(timeIntervalSince1970: 253_402_300_800.007)) == "10000-01-01T00:00:00.007Z")
        // Far beyond: no trap (a signed token's exp of 1e16 s once trapped here).
        #expect(!ISO8601.format(Date(timeIntervalSince1970: 1e16)).isEmpty)
        #expect(!ISO8601.format(Date(timeIntervalSince1970: -1e16)).isEmpty)
        #expect(ISO8601.range.contains(Date(timeIntervalSince1970: 253_402_300_799.999)))
        #expect(!ISO8601.range.contains(Date(timeIntervalSince1970: 253_402_300_800)))
        // The digit-by-digit formatting agrees with Foundation's across the years.
        let foundation = ISO8601DateFormatter()
        foundation.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<1000 {
            let milliseconds = Int64.random(in: 0..<253_402_300_800_000, using: &generator)
            let sample = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            #expect(ISO8601.format(sample) == foundation.string(from: sample))
        }
    }

    @Test("an unknown type, a malformed envelope and a payload of the wrong shape are refused")
    func refusals() {
        let unknown =
            #"{"eventId":"00000000-0000-0000-0000-000000000001","type":"Nope","aggregateId":"x","occurredAt":"2026-11-21T10:15:00Z","schemaVersion":1,"payload":{}}"#
        let wrongShape = unknown.replacingOccurrences(of: "Nope", with: "OrderAccepted")
        let noPayload = wrongShape.replacingOccurrences(of: #","payload":{}"#, with: "")
        let cases = [
            (unknown, "unknown event type 'Nope'"), ("not json", "no valid envelope"), ("{}", "no valid envelope"),
            (wrongShape, "OrderAccepted payload does not match its contract"),
            (noPayload, "OrderAccepted payload does not match its contract"),
        ]
        for (text, reason) in cases {
            let error = #expect(throws: EventDecodingError.self) { try EventCatalog.decode(Data(text.utf8)) }
            #expect(error?.reason.hasPrefix(reason) == true, "\(text): \(String(describing: error))")
        }
    }

    @Test("every topic of the architecture is listed once")
    func topics() {
        #expect(Set(Topic.all).count == 8)
        #expect(Set(EventCatalog.payloadTypes.map { $0.topic }) == Set(Topic.all))
    }
}
