import Contracts
import Foundation
import Kafka
import OrderService
import Realtime
import RealtimeTesting
import ServiceKit
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing

/// One order service for the suite (starting one per test would spend seconds in consumer-group joins), its
/// test users, and helpers that drive orders through their states. Allocation's part (accepted offers) is
/// played by producing its events.
final class OrderHarness: Sendable {
    let client: ServiceClient
    let schema: String
    let producer: KafkaProducer
    let admin: String
    let vendorId: String
    let vendor: String
    let customer: String
    let rider: String
    let riderId: String
    let otherRider: String
    /// The service's clock: pickup-saga deadlines pass when a test steps it.
    let clock: SteppedClock

    private static let shared = SuiteShared { try await OrderHarness.start(sagaStepTimeout: "2") }

    /// The suite's service, started on first use and left running until the test process ends.
    static func get() async throws -> OrderHarness { try await shared.get() }

    private static let stepped = SuiteShared { try await OrderHarness.start(sagaStepTimeout: "60") }

    /// A service whose saga steps time out (60 s) only when a test steps its clock (its tests run one at a time).
    static func getStepped() async throws -> OrderHarness { try await stepped.get() }

    /// The step time-out of the stepped service, and a step past it.
    static let stepPastSagaTimeout = Duration.seconds(61)

    /// Publishes `payload` on its topic, keyed by `aggregateId`, as the service that owns it would.
    func publish<Payload: EventPayload>(_ payload: Payload, aggregateId: String) async throws {
        try await producer.send(
            topic: Payload.topic.rawValue, key: aggregateId,
            value: try ContractCoding.encode(
                EventEnvelope(aggregateId: aggregateId, occurredAt: Date(), payload: payload)))
    }

    /// Location's report that tracking of delivery `order` started.
    func reportTrackingStarted(_ order: OrderView) async throws {
        try await publish(
            TrackingStarted(
                jobId: order.id, kind: .delivery, customerId: order.customerId, courierId: riderId, startedAt: Date()),
            aggregateId: order.id)
    }

    /// Republishes of a stalled pickup saga before it ends failed, in these tests.
    static let sagaMaximumRepublishes = 3

    private init(
        client: ServiceClient, schema: String, producer: KafkaProducer, tokens: [String], vendorId: String,
        riderId: String, clock: SteppedClock
    ) {
        self.clock = clock
        self.client = client
        self.schema = schema
        self.producer = producer
        (admin, vendor, customer, rider, otherRider) = (tokens[0], tokens[1], tokens[2], tokens[3], tokens[4])
        self.vendorId = vendorId
        self.riderId = riderId
    }

    private static func start(sagaStepTimeout: String) async throws -> OrderHarness {
        let schema = uniqueName("orders")
        let clock = SteppedClock()
        let client = try await startSuiteService(
            OrderService.self, schema: schema,
            extra: [
                "SAGA_STEP_TIMEOUT_SECONDS": sagaStepTimeout, "SAGA_CHECK_INTERVAL_MS": "300",
                "PROOF_PHOTO_MAX_BYTES": "65536", "SAGA_MAX_REPUBLISHES": String(sagaMaximumRepublishes),
            ],
            now: clock.now
        )
        let vendorId = uniqueName("vendor")
        let riderId = uniqueName("rider")
        let tokens = [
            try await TestAuth.token(uniqueName("admin"), .admin), try await TestAuth.token(vendorId, .vendor),
            try await TestAuth.token(uniqueName("customer"), .customer, name: "Asha"),
            try await TestAuth.token(riderId, .rider, name: "Ravi"),
            try await TestAuth.token(uniqueName("rider"), .rider),
        ]
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                client: KafkaClientConfiguration(
                    bootstrapServers: [try TestInfrastructure.kafkaBrokers()], clientId: "order-tests")
            ),
            logger: TestInfrastructure.logger("order-tests")
        )
        let harness = OrderHarness(
            client: client, schema: schema, producer: producer, tokens: tokens, vendorId: vendorId, riderId: riderId,
            clock: clock)
        let created = try await client.post(
            "/v1/vendors", token: harness.admin,
            json: [
                "id": .string(vendorId), "name": .string("Spice Route"),
                "address": JSONValue.object(
                    JSONObject([
                        ("line1", .string("12 MG Road")), ("area", .string("Indiranagar")), ("lat", .number("12.97")),
                        ("lng", .number("77.64")),
                    ])),
            ] as [String: JSONValue]
        )
        #expect(created.status == 201, "\(created.text)")
        return harness
    }

    // MARK: Driving orders

    struct NewOrder: Encodable {
        var vendorId: String
        var deliveryAddress = Address(line1: "4 Lake View", area: "Koramangala", lat: 12.93, lng: 77.62)
        var paymentMode = PaymentMode.prepaid
        var totalAmount: Decimal = 249.5
        var requiresPhotoProof = false
    }

    func createOrder(paymentMode: PaymentMode = .prepaid, requiresPhotoProof: Bool = false) async throws -> OrderView {
        let answer = try await client.post(
            "/v1/orders", token: customer,
            json: NewOrder(vendorId: vendorId, paymentMode: paymentMode, requiresPhotoProof: requiresPhotoProof)
        )
        try #require(answer.status == 201, "\(answer.text)")
        return try answer.decode(OrderView.self)
    }

    @discardableResult
    func post(_ path: String, _ token: String, key: String? = nil) async throws -> ServiceClient.Answer {
        try await client.request(.POST, path, token: token, headers: key.map { ["Idempotency-Key": $0] } ?? [:])
    }

    /// Allocation's accepted offer, as it would publish it.
    func acceptOffer(orderId: String, riderId: String, riderName: String = "Ravi") async throws {
        let envelope = EventEnvelope(
            aggregateId: orderId,
            occurredAt: Date(),
            payload: OfferAccepted(
                offerId: UUID().uuidString, orderId: orderId, rider: PersonRef(id: riderId, name: riderName))
        )
        try await producer.send(
            topic: Topic.allocationEvents.rawValue, key: orderId, value: try ContractCoding.encode(envelope))
    }

    func order(_ id: String, token: String? = nil) async throws -> OrderView {
        try await client.get("/v1/orders/\(id)", token: token ?? admin).decode(OrderView.self)
    }

    /// An order that is ready, has `riderId` assigned, and (optionally) the rider's arrival.
    func readyOrder(arrived: Bool = true, requiresPhotoProof: Bool = false, paymentMode: PaymentMode = .prepaid)
        async throws -> OrderView
    {
        let order = try await createOrder(paymentMode: paymentMode, requiresPhotoProof: requiresPhotoProof)
        try #require(try await post("/v1/orders/\(order.id)/accept", vendor).status == 200)
        try #require(try await post("/v1/orders/\(order.id)/ready", vendor).status == 200)
        try await acceptOffer(orderId: order.id, riderId: riderId)
        try await eventually(timeout: .seconds(30), "the rider assigned") {
            try await self.order(order.id).rider?.id == self.riderId
        }
        if arrived { try #require(try await post("/v1/orders/\(order.id)/arrived", rider).status == 200) }
        return try await self.order(order.id)
    }
}
