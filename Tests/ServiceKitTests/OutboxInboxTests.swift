import Contracts
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Kafka
import Logging
import NIOCore
import PostgresNIO
import RealtimeTesting
import ServiceKit
import Synchronization
import TestSupport
import Testing

/// The transactional outbox and the consumer inbox against the real Postgres and broker.
@Suite("Outbox and inbox", .timeLimit(.minutes(4)))
struct OutboxInboxTests {
    let logger = TestInfrastructure.logger("outbox-tests")

    static func client(_ brokers: String) -> KafkaClientConfiguration {
        KafkaClientConfiguration(bootstrapServers: [brokers], clientId: "outbox-tests")
    }

    /// A topic of its own on the test broker, and the broker's address.
    func newTopic(_ name: String, partitions: Int = 1) async throws -> (brokers: String, topic: Topic) {
        let brokers = try TestInfrastructure.kafkaBrokers()
        let topic = Topic(uniqueName(name))
        try await KafkaAdmin.createTopics(
            [KafkaTopicSpecification(name: topic.rawValue, partitions: partitions)], client: Self.client(brokers),
            logger: logger)
        return (brokers, topic)
    }

    static func settings() -> ServiceConfiguration.OutboxSettings {
        try! ServiceConfiguration(
            serviceName: "t", defaultPort: 0, defaultSchema: "t", environment: try! testServiceEnvironment()
        ).outbox
    }

    /// The envelopes on `topic` whose aggregate is one of `aggregates`, read from the start until `count` arrived.
    static func readEvents(
        topic: Topic, brokers: String, aggregates: Set<String>, count: Int, logger: Logger
    ) async throws -> [DecodedEvent] {
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(client: client(brokers), groupId: uniqueName("reader")),
            topics: [topic.rawValue], logger: logger
        )
        let events = try await withTimeout(.seconds(60)) {
            var events: [DecodedEvent] = []
            for try await message in consumer.messages {
                guard let event = try? EventCatalog.decode(message.value), aggregates.contains(event.header.aggregateId)
                else {
                    continue
                }
                events.append(event)
                if events.count >= count { break }
            }
            return events
        }
        await consumer.close()
        return events
    }

    static func accepted(_ orderId: String, sequence: Int) -> EventEnvelope<OrderAccepted> {
        EventEnvelope(
            aggregateId: orderId, occurredAt: Date(),
            payload: OrderAccepted(orderId: orderId, customerId: "seq-\(sequence)", vendorId: "v")
        )
    }

    @Test("rows of a rolled-back transaction are never published; committed rows are, in order per aggregate")
    func rollbackNeverPublished() async throws {
        let brokers = try TestInfrastructure.kafkaBrokers()
        let rolledBack = uniqueName("rolled")
        let committed = uniqueName("committed")
        try await withTestDatabase { database in
            let outbox = Outbox(schema: database.schema, now: .system)
            let producer = try KafkaProducer(
                configuration: KafkaProducerConfiguration(client: Self.client(brokers)), logger: logger)
            let relay = OutboxRelay(
                database: database, producer: producer, outbox: outbox, settings: Self.settings(), logger: logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await relay.run() }
                struct Abort: Error {}
                await #expect(throws: Abort.self) {
                    try await database.transaction { connection in
                        try await outbox.enqueue(Self.accepted(rolledBack, sequence: 0), on: connection, logger: logger)
                        throw Abort()
                    }
                }
                try await database.transaction { connection in
                    for sequence in 0..<5 {
                        try await outbox.enqueue(
                            Self.accepted(committed, sequence: sequence), on: connection, logger: logger)
                    }
                }
                let events = try await Self.readEvents(
                    topic: .ordersEvents, brokers: brokers, aggregates: [rolledBack, committed], count: 5,
                    logger: logger
                )
                #expect(events.allSatisfy { $0.header.aggregateId == committed })
                #expect(
                    events.compactMap { $0.payload(as: OrderAccepted.self)?.customerId } == (0..<5).map { "seq-\($0)" })
                try await eventually("rows marked published") {
                    try await database.scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL", as: Int.self)
                        == 0
                }
                #expect(try await database.scalar("SELECT count(*) FROM outbox", as: Int.self) == 5)
                group.cancelAll()
            }
            await producer.close()
        }
    }

    /// A service with no routes of its own: the platform alone.
    enum BareService: ServiceDefinition {
        static let name = "bare-service"
        static let defaultPort = 0
        static let defaultSchema = "bare"
        static func migrations() throws -> MigrationSet { MigrationSet(component: name, migrations: []) }
        static func makeApplication(platform: ServicePlatform, environment: ServiceEnvironment) async throws
            -> ServiceApplication
        {
            platform.makeApplication(router: platform.makeRouter())
        }
    }

    @Test(
        "with the broker down, committed rows stay pending and /ready says so; once it is back they are all published in order"
    )
    func brokerOutage() async throws {
        let broker = TansuBroker(port: 19101)
        try await broker.start()
        let schema = uniqueName("outage")
        let environment = try testServiceEnvironment(
            schema: schema, brokers: broker.address, extra: ["KAFKA_DELIVERY_TIMEOUT_MS": "2000"])
        let app = try await BareService.buildApplication(
            configuration: try BareService.configuration(environment: environment), environment: environment,
            logger: logger
        )
        let aggregates = (0..<3).map { _ in uniqueName("order") }
        try await withRunningService(app) { client in
            try await eventually("ready") { try await client.get("/ready").status == 200 }
            await broker.stop()

            try await eventually("/ready reporting the broker down") {
                let response = try await client.get("/ready")
                guard response.status == 503 else { return false }
                let body = try JSONDecoder().decode(HealthRoutes.ReadyBody.self, from: response.body)
                return body.checks == ["kafka": "down", "outbox": "up", "postgres": "up"]
                    && body.error?.code == .notReady && body.error?.message == "down: kafka"
            }
            #expect(try await client.get("/health").status == 200)

            try await withTestDatabase(schema: schema, migrations: []) { database in
                let outbox = Outbox(schema: schema, now: .system)
                for sequence in 0..<4 {
                    for aggregate in aggregates {
                        try await database.transaction { connection in
                            try await outbox.enqueue(
                                Self.accepted(aggregate, sequence: sequence), on: connection, logger: logger)
                        }
                    }
                }
                // The first attempt fails once librdkafka's delivery time-out (2 s) passes: nothing is published.
                try await eventually(timeout: .seconds(30), "a failed attempt") {
                    try await database.scalar("SELECT max(attempts) FROM outbox", as: Int.self) ?? 0 >= 1
                }
                #expect(
                    try await database.scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL", as: Int.self)
                        == 12)

                try await broker.start()
                try await eventually(timeout: .seconds(90), "pending rows published after the broker came back") {
                    try await database.scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL", as: Int.self)
                        == 0
                }
            }
            try await eventually("ready again") { try await client.get("/ready").status == 200 }
        }
        // The restarted broker started empty, so everything on it was published after the outage.
        let events = try await Self.readEvents(
            topic: .ordersEvents, brokers: broker.address, aggregates: Set(aggregates), count: 12, logger: logger
        )
        await broker.stop()
        for aggregate in aggregates {
            let sequence = events.filter { $0.header.aggregateId == aggregate }.compactMap {
                $0.payload(as: OrderAccepted.self)?.customerId
            }
            #expect(sequence == (0..<4).map { "seq-\($0)" }, "order of \(aggregate)")
        }
    }

    @Test("an event too large to publish is refused before it is written, with 413 EVENT_TOO_LARGE at the edge")
    func oversizedEventRefused() async throws {
        try await withTestDatabase { database in
            let outbox = Outbox(schema: database.schema, now: .system)
            let huge = EventEnvelope(
                aggregateId: "order-huge",
                occurredAt: Date(),
                payload: OrderAccepted(
                    orderId: "order-huge", customerId: String(repeating: "x", count: Outbox.maximumEventBytes),
                    vendorId: "v")
            )
            await #expect(throws: EventTooLarge.self) {
                try await database.transaction { connection in
                    try await outbox.enqueue(huge, on: connection, logger: logger)
                }
            }
            let written = try await database.scalar("SELECT count(*) FROM outbox", as: Int.self)
            #expect(written == 0)
        }
        let router = Router()
        router.add(middleware: ErrorMiddleware())
        router.get("/large") { _, _ -> String in
            throw EventTooLarge(eventType: "OrderCreated", bytes: 2_000_000, maximumBytes: Outbox.maximumEventBytes)
        }
        try await Application(router: router).test(.router) { client in
            try await client.execute(uri: "/large", method: .get) { response in
                #expect(response.status == .contentTooLarge)
                let body = try JSONDecoder().decode(APIError.Body.self, from: Data(buffer: response.body))
                #expect(body.error.code == .eventTooLarge)
            }
        }
    }

    @Test(
        "a row the broker refuses for good becomes a dead letter after bounded attempts; its key waits, others flow"
    )
    func refusedRowDeadLettered() async throws {
        let schema = uniqueName("deadletter")
        let environment = try testServiceEnvironment(schema: schema)
        let app = try await BareService.buildApplication(
            configuration: try BareService.configuration(environment: environment), environment: environment,
            logger: logger
        )
        let (held, other) = (uniqueName("order"), uniqueName("order"))
        try await withRunningService(app) { client in
            try await eventually("ready") { try await client.get("/ready").status == 200 }
            try await withTestDatabase(schema: schema, migrations: []) { database in
                let outbox = Outbox(schema: schema, now: .system)
                // Written before the size was checked at enqueue (or by hand): the broker would refuse it.
                let oversized = String(repeating: "x", count: Outbox.maximumEventBytes + 1)
                try await database.client.query(
                    """
                    INSERT INTO outbox (event_id, topic, message_key, event_type, payload)
                    VALUES (\(UUID()), \(Topic.ordersEvents.rawValue), \(held), 'OrderAccepted', \(oversized))
                    """, logger: logger
                )
                try await database.transaction { connection in
                    try await outbox.enqueue(Self.accepted(held, sequence: 1), on: connection, logger: logger)
                    try await outbox.enqueue(Self.accepted(other, sequence: 0), on: connection, logger: logger)
                }
                try await eventually("the other aggregate's event published") {
                    try await database.scalar(
                        "SELECT count(*) FROM outbox WHERE message_key = \(other) AND published_at IS NOT NULL",
                        as: Int.self) == 1
                }
                try await eventually("the refused row moved to the dead letters after its attempts") {
                    try await database.scalar(
                        "SELECT attempts FROM outbox_dead_letters WHERE message_key = \(held)", as: Int.self)
                        == OutboxRelay.permanentFailureAttempts
                }
                #expect(
                    try await database.scalar(
                        "SELECT count(*) FROM outbox WHERE length(payload) > 900000", as: Int.self) == 0)

                // Its key is held, so the aggregate's later event keeps its place; other aggregates still flow.
                let later = uniqueName("order")
                try await database.transaction { connection in
                    try await outbox.enqueue(Self.accepted(later, sequence: 0), on: connection, logger: logger)
                }
                try await eventually("an aggregate written after the dead letter published") {
                    try await database.scalar(
                        "SELECT count(*) FROM outbox WHERE message_key = \(later) AND published_at IS NOT NULL",
                        as: Int.self) == 1
                }
                #expect(
                    try await database.scalar(
                        "SELECT count(*) FROM outbox WHERE message_key = \(held) AND published_at IS NULL", as: Int.self
                    )
                        == 1)
                let ready = try await client.get("/ready")
                #expect(ready.status == 200)
                let body = try JSONDecoder().decode(HealthRoutes.ReadyBody.self, from: ready.body)
                #expect(body.status == "degraded")
                #expect(body.checks["outbox"] == "degraded")
                #expect(body.error?.message.contains("OrderAccepted for \(held)") == true, "\(body)")
                #expect(try await client.get("/metrics").text.contains("outbox_dead_letters_total"))

                // The operator resolves the dead letter: the key is released and its event published.
                try await database.client.query("DELETE FROM outbox_dead_letters", logger: logger)
                try await eventually("the held aggregate's event published once released") {
                    try await database.scalar(
                        "SELECT count(*) FROM outbox WHERE message_key = \(held) AND published_at IS NOT NULL",
                        as: Int.self) == 1
                }
                let again = try JSONDecoder().decode(
                    HealthRoutes.ReadyBody.self, from: try await client.get("/ready").body)
                #expect(again.status == "ready")
            }
        }
    }

    @Test("the same event delivered twice has its effect once; an unreadable message is dead-lettered and skipped")
    func inboxDeduplicates() async throws {
        let (brokers, topic) = try await newTopic("inbox")
        try await withTestDatabase { database in
            try await database.client.query(
                "CREATE TABLE effects (event_id uuid NOT NULL, order_id text NOT NULL)", logger: logger)
            let consumer = EventConsumer(
                name: "effects", topics: [topic],
                configuration: KafkaConsumerConfiguration(client: Self.client(brokers), groupId: uniqueName("group")),
                effect: .transactional(database) { event, connection in
                    let orderId = event.payload(as: OrderAccepted.self)?.orderId ?? "?"
                    try await connection.query(
                        "INSERT INTO effects (event_id, order_id) VALUES (\(event.header.eventId), \(orderId))",
                        logger: logger
                    )
                },
                logger: logger
            )
            let producer = try KafkaProducer(
                configuration: KafkaProducerConfiguration(client: Self.client(brokers)), logger: logger)
            let duplicated = try ContractCoding.encode(Self.accepted("order-dup", sequence: 0))
            let sentinel = try ContractCoding.encode(Self.accepted("order-sentinel", sequence: 1))
            try await producer.send(topic: topic.rawValue, key: "order-dup", value: duplicated)
            try await producer.send(topic: topic.rawValue, key: "order-dup", value: duplicated)
            try await producer.send(topic: topic.rawValue, key: "junk", value: Data("not an event".utf8))
            try await producer.send(topic: topic.rawValue, key: "order-sentinel", value: sentinel)
            await producer.close()

            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await consumer.run() }
                try await eventually(timeout: .seconds(30), "the sentinel's effect") {
                    try await database.scalar(
                        "SELECT count(*) FROM effects WHERE order_id = 'order-sentinel'", as: Int.self) == 1
                }
                group.cancelAll()
            }
            #expect(
                try await database.scalar("SELECT count(*) FROM effects WHERE order_id = 'order-dup'", as: Int.self)
                    == 1)
            #expect(
                try await database.scalar("SELECT count(*) FROM inbox WHERE consumer = 'effects'", as: Int.self) == 2)
            let dead = try await database.scalar(
                "SELECT convert_from(payload, 'UTF8') FROM dead_letters", as: String.self)
            #expect(dead == "not an event")
        }
    }

    @Test("events a consumer does not want are skipped without a transaction: no effect, no inbox row")
    func unwantedEventsAreSkipped() async throws {
        let (brokers, topic) = try await newTopic("wanted")
        try await withTestDatabase { database in
            try await database.client.query("CREATE TABLE effects (order_id text NOT NULL)", logger: logger)
            let consumer = EventConsumer(
                name: "choosy", topics: [topic],
                configuration: KafkaConsumerConfiguration(client: Self.client(brokers), groupId: uniqueName("group")),
                wanted: { $0.payload(as: OrderAccepted.self)?.orderId.hasPrefix("wanted") == true },
                effect: .transactional(database) { event, connection in
                    let orderId = event.payload(as: OrderAccepted.self)?.orderId ?? "?"
                    try await connection.query("INSERT INTO effects (order_id) VALUES (\(orderId))", logger: logger)
                },
                logger: logger
            )
            let producer = try KafkaProducer(
                configuration: KafkaProducerConfiguration(client: Self.client(brokers)), logger: logger)
            for (sequence, orderId) in ["wanted-1", "other-1", "other-2", "wanted-2", "other-3"].enumerated() {
                try await producer.send(
                    topic: topic.rawValue, key: "orders",
                    value: try ContractCoding.encode(Self.accepted(orderId, sequence: sequence)))
            }
            await producer.close()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await consumer.run() }
                try await eventually(timeout: .seconds(30), "the wanted events' effects") {
                    try await database.scalar("SELECT count(*) FROM effects", as: Int.self) == 2
                }
                group.cancelAll()
            }
            let applied = try await database.client.query(
                "SELECT order_id FROM effects ORDER BY order_id", logger: logger)
            var orderIds: [String] = []
            for try await orderId in applied.decode(String.self) { orderIds.append(orderId) }
            #expect(orderIds == ["wanted-1", "wanted-2"])
            #expect(
                try await database.scalar("SELECT count(*) FROM inbox WHERE consumer = 'choosy'", as: Int.self) == 2)
        }
    }

    @Test(
        "a consumer applies what was already fetched in one transaction, a repeat within it once; a failing event is retried alone and dead-lettered without holding up the rest",
        arguments: [false, true]
    )
    func consumerBatchesAndIsolatesFailures(perEventHandler: Bool) async throws {
        let (brokers, topic) = try await newTopic("batch")
        struct Poisoned: Error {}
        try await withTestDatabase { database in
            try await database.client.query(
                "CREATE TABLE effects (event_id uuid NOT NULL, order_id text NOT NULL, transaction bigint NOT NULL)",
                logger: logger)
            @Sendable func apply(_ event: DecodedEvent, on connection: PostgresConnection) async throws {
                let orderId = event.payload(as: OrderAccepted.self)?.orderId ?? "?"
                if orderId == "order-poison" { throw Poisoned() }
                try await connection.query(
                    """
                    INSERT INTO effects (event_id, order_id, transaction)
                    VALUES (\(event.header.eventId), \(orderId), txid_current())
                    """, logger: logger)
            }
            let effect: EventConsumer.Effect =
                perEventHandler
                ? .transactional(database) { event, connection in try await apply(event, on: connection) }
                : .transactionalBatch(database) { events, connection in
                    for event in events { try await apply(event, on: connection) }
                    return nil
                }
            let consumer = EventConsumer(
                name: "batched", topics: [topic],
                configuration: KafkaConsumerConfiguration(client: Self.client(brokers), groupId: uniqueName("group")),
                batchLimit: 8, effect: effect, logger: logger
            )
            let producer = try KafkaProducer(
                configuration: KafkaProducerConfiguration(client: Self.client(brokers)), logger: logger)
            // Published before the consumer starts: fetched together. One is delivered twice in a row (within a
            // batch), another far apart (in another batch), and a poisoned event fails the batch it is in.
            let first = try (0..<20).map { try ContractCoding.encode(Self.accepted("order-\($0)", sequence: $0)) }
            let poisoned = try ContractCoding.encode(Self.accepted("order-poison", sequence: 30))
            for value in first[0...3] + [first[3]] + first[4...9] + [poisoned] + first[10...] + [first[1]] {
                try await producer.send(topic: topic.rawValue, key: "orders", value: value)
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await consumer.run() }
                try await eventually(timeout: .seconds(30), "the first twenty effects, around the poisoned one") {
                    try await database.scalar("SELECT count(*) FROM effects", as: Int.self) == 20
                }
                let poison = try ContractCoding.encode(Self.accepted("order-poison", sequence: 20))
                let sentinel = try ContractCoding.encode(Self.accepted("order-sentinel", sequence: 21))
                for value in [poison, Data("not an event".utf8), sentinel] {
                    try await producer.send(topic: topic.rawValue, key: "orders", value: value)
                }
                try await eventually(timeout: .seconds(30), "the sentinel's effect after the poisoned event") {
                    try await database.scalar(
                        "SELECT count(*) FROM effects WHERE order_id = 'order-sentinel'", as: Int.self) == 1
                }
                group.cancelAll()
            }
            await producer.close()
            #expect(try await database.scalar("SELECT count(*) FROM effects", as: Int.self) == 21)
            #expect(
                try await database.scalar("SELECT count(DISTINCT order_id) FROM effects", as: Int.self) == 21)
            let largest = try await database.scalar(
                "SELECT max(size) FROM (SELECT count(*) AS size FROM effects GROUP BY transaction) AS batches",
                as: Int.self)
            #expect(largest ?? 0 > 1)
            #expect(largest ?? 0 <= 8)
            #expect(
                try await database.scalar("SELECT count(*) FROM inbox WHERE consumer = 'batched'", as: Int.self) == 21)
            let dead = try await database.scalar("SELECT count(*) FROM dead_letters", as: Int.self)
            #expect(dead == 3, "the two poisoned events and the unreadable message")
        }
    }

    @Test(
        "a stream consumer misses nothing published while it starts, and applies again what came within its replay"
    )
    func streamConsumerStartsFromItsReplay() async throws {
        let (brokers, topic) = try await newTopic("stream", partitions: 2)
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(client: Self.client(brokers)), logger: logger)
        try await producer.send(
            topic: topic.rawValue, key: "order-before",
            value: try ContractCoding.encode(Self.accepted("order-before", sequence: 0)))
        // The broker stamps in milliseconds: the start is clearly after the first event.
        try await Task.sleep(for: .milliseconds(5))
        let started = Date()
        let seen = SeenOrders()
        func consumer(replay: Duration) -> EventConsumer {
            EventConsumer(
                name: "stream", topics: [topic],
                configuration: KafkaConsumerConfiguration(client: Self.client(brokers), groupId: uniqueName("stream")),
                start: .eachInstance(replay: replay, now: { started }),
                effect: .direct { event in
                    seen.withLock { $0.append(event.payload(as: OrderAccepted.self)?.orderId ?? "?") }
                },
                logger: logger)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            // No replay: what is published as it starts (before a group could have been joined) is read, what was
            // published before is not.
            group.addTask { try await consumer(replay: .zero).run() }
            try await producer.send(
                topic: topic.rawValue, key: "order-after",
                value: try ContractCoding.encode(Self.accepted("order-after", sequence: 1)))
            try await eventually(timeout: .seconds(10), "the event published while starting") {
                seen.withLock { $0.contains("order-after") }
            }
            #expect(!seen.withLock { $0.contains("order-before") })
            group.cancelAll()
        }
        seen.withLock { $0.removeAll() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await consumer(replay: .seconds(60)).run() }
            try await eventually(timeout: .seconds(10), "both events again") {
                seen.withLock { Set($0) == ["order-before", "order-after"] }
            }
            group.cancelAll()
        }
        await producer.close()
    }
}

/// The order ids a test consumer saw.
private final class SeenOrders: Sendable {
    private let ids = Mutex<[String]>([])
    func withLock<T>(_ body: (inout [String]) -> T) -> T { ids.withLock { body(&$0) } }
}
