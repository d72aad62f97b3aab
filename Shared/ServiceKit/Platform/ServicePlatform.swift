import Contracts
import Foundation
import Hummingbird
import HummingbirdCore
import Kafka
import Logging
import PostgresNIO
import ServiceLifecycle

/// What every service runs on: its Postgres schema (migrated), the Kafka producer and outbox relay, the token
/// verifier, consumers, and the HTTP router with the shared middleware and `/health`, `/ready`, `/metrics`.
///
/// ``prepare(configuration:migrations:logger:now:)`` does the start-up work that must finish before anything is
/// served; ``makeApplication(router:server:servicesShutDownFirst:)`` then returns what to run: the Postgres
/// client, the producer, the relay, the consumers and extra services, then the HTTP server, then services that
/// must stop before it (realtime); shutdown runs in reverse.
package struct ServicePlatform: Sendable {
    package let configuration: ServiceConfiguration
    package let logger: Logger
    package let database: Database
    package let producer: KafkaProducer
    package let outbox: Outbox
    /// Told of every event applied and every write request answered; ``DueJob``s wake on it.
    package let activity = Activity()
    package let verifier: AccessTokenVerifier
    /// The time, for every decision that depends on it (deadlines, freshness); tests pass a clock they step.
    package let now: Now
    /// The platform's services in start order (shutdown runs in reverse), the service's consumers as one
    /// ``EventConsumers`` where the first was added.
    package var services: [any Service] {
        guard let consumersPosition else { return otherServices }
        var services = otherServices
        services.insert(EventConsumers(consumers), at: consumersPosition)
        return services
    }
    private var otherServices: [any Service] = []
    /// The consumers added, in order.
    package private(set) var consumers: [EventConsumer] = []
    private var consumersPosition: Int?
    package private(set) var readinessChecks: [ReadinessCheck] = []

    /// Applies the migrations (ServiceKit's, then the service's), creates the topics, and opens the producer.
    /// - Throws: ``MigrationError``, ``ConfigurationError`` (e.g. unreadable keys), or a Postgres error when the
    ///   database stays unreachable for 30 s.
    package static func prepare(
        configuration: ServiceConfiguration, migrations: MigrationSet, logger: Logger, now: Now = .system
    ) async throws -> ServicePlatform {
        ServiceMetrics.bootstrap()
        logger.info(
            "starting",
            metadata: [
                "http.port": "\(configuration.http.port)", "db.schema": "\(configuration.database.schema)",
                "kafka.brokers": "\(configuration.kafka.brokers.joined(separator: ","))",
                "kafka.library": "\(KafkaLibrary.description)",
            ]
        )
        if KafkaLibrary.isTooOldForTansu {
            logger.warning(
                "\(KafkaLibrary.description) cannot talk to the local Tansu broker; put librdkafka 2.1 or newer first on LD_LIBRARY_PATH (make run does)"
            )
        }
        try await migrate(
            configuration: configuration, sets: [try MigrationSet.platform(), migrations], logger: logger)
        await createTopics(configuration: configuration, logger: logger)

        var producerConfiguration = KafkaProducerConfiguration(
            client: configuration.kafka.clientConfiguration(clientId: configuration.serviceName)
        )
        producerConfiguration.deliveryTimeout = configuration.kafka.deliveryTimeout
        let producer = try KafkaProducer(configuration: producerConfiguration, logger: logger)
        let verifier = try await AccessTokenVerifier.load(configuration.auth, logger: logger)
        let client = Database.makeClient(configuration.database, logger: logger)
        let database = Database(client: client, schema: configuration.database.schema, logger: logger)
        let outbox = Outbox(schema: configuration.database.schema, now: now)

        var platform = ServicePlatform(
            configuration: configuration, logger: logger, database: database, producer: producer, outbox: outbox,
            verifier: verifier, now: now
        )
        platform.otherServices = [
            client, producer,
            OutboxRelay(
                database: database, producer: producer, outbox: outbox, settings: configuration.outbox, logger: logger),
        ]
        if let keyRefresh = verifier.keyRefreshJob(every: configuration.auth.jwksRefreshInterval) {
            platform.otherServices.append(keyRefresh)
        }
        platform.readinessChecks = [
            ReadinessCheck(name: "postgres") { try await client.execute("SELECT 1", logger: logger) },
            ReadinessCheck(name: "kafka") { _ = try await producer.checkBroker(timeout: .milliseconds(1500)) },
            ReadinessCheck(name: "outbox", isAdvisory: true) { try await OutboxRelay.checkDeadLetters(in: database) },
        ]
        return platform
    }

    /// The consumer-group configuration for consumer `name` of this service.
    package func consumerConfiguration(name: String) -> KafkaConsumerConfiguration {
        KafkaConsumerConfiguration(
            client: configuration.kafka.clientConfiguration(clientId: configuration.serviceName),
            groupId: "\(configuration.kafka.groupPrefix)\(configuration.serviceName).\(name)"
        )
    }

    /// Adds a consumer of `topics` whose effect runs once per event in a transaction with the inbox; the events
    /// already fetched, up to `batchLimit`, share one transaction, which holds what each handler locks until it
    /// commits. Events `wanted` turns down are skipped without a transaction; it may pass more than the handler
    /// acts on, never less.
    package mutating func addConsumer(
        name: String, topics: [Topic], batchLimit: Int = 1,
        wanted: @escaping @Sendable (DecodedEvent) -> Bool = { _ in true },
        handler: @escaping @Sendable (DecodedEvent, PostgresConnection) async throws -> Void
    ) {
        addConsumer(
            EventConsumer(
                name: name, topics: topics, configuration: consumerConfiguration(name: name), batchLimit: batchLimit,
                wanted: wanted, effect: .transactional(database, handler), activity: activity, logger: logger
            )
        )
    }

    /// Adds a consumer like ``addConsumer(name:topics:batchLimit:wanted:handler:)`` (one event a transaction)
    /// whose handler returns work to do after its transaction committed (e.g. telling sockets about what it wrote).
    package mutating func addConsumerWithFollowUp(
        name: String, topics: [Topic], wanted: @escaping @Sendable (DecodedEvent) -> Bool = { _ in true },
        handler: @escaping @Sendable (DecodedEvent, PostgresConnection) async throws -> EventConsumer.FollowUp?
    ) {
        addConsumer(
            EventConsumer(
                name: name, topics: topics, configuration: consumerConfiguration(name: name), wanted: wanted,
                effect: .transactionalWithFollowUp(database, handler), activity: activity, logger: logger
            )
        )
    }

    /// Adds a consumer like ``addConsumerWithFollowUp(name:topics:wanted:handler:)`` whose handler takes up to `limit`
    /// events at once (those already fetched, none waited for) in one transaction: for high-volume topics.
    package mutating func addBatchConsumer(
        name: String, topics: [Topic], limit: Int,
        handler: @escaping @Sendable ([DecodedEvent], PostgresConnection) async throws -> EventConsumer.FollowUp?
    ) {
        addConsumer(
            EventConsumer(
                name: name, topics: topics, configuration: consumerConfiguration(name: name), batchLimit: limit,
                effect: .transactionalBatch(database, handler), activity: activity, logger: logger
            )
        )
    }

    /// Adds a consumer that every instance runs for itself, applying events without the inbox: for fan-out to
    /// sockets. It reads from `replay` before the instance started (no group to join, so nothing published while
    /// it starts is missed), and applies again what was published while the service was down for up to `replay`:
    /// the handler must tolerate repeats (emits with a dedupe key do).
    package mutating func addStreamConsumer(
        name: String, topics: [Topic], replay: Duration = .zero,
        handler: @escaping @Sendable (DecodedEvent) async throws -> Void
    ) {
        let now = self.now
        addConsumer(
            EventConsumer(
                name: name, topics: topics,
                configuration: consumerConfiguration(name: "\(name).\(UUID().uuidString.lowercased())"),
                start: .eachInstance(replay: replay, now: { now() }), effect: .direct(handler), activity: activity,
                logger: logger)
        )
    }

    private mutating func addConsumer(_ consumer: EventConsumer) {
        if consumersPosition == nil { consumersPosition = otherServices.count }
        consumers.append(consumer)
    }

    /// Adds a long-lived service (e.g. a scheduler) to run with the platform's.
    package mutating func addService(_ service: any Service) { otherServices.append(service) }

    /// Adds a check to `/ready`; call it before ``makeRouter()``.
    package mutating func addReadinessCheck(_ check: ReadinessCheck) { readinessChecks.append(check) }

    /// A router with the shared middleware (errors as JSON, request logs, metrics) and the health routes.
    package func makeRouter() -> Router<ServiceRequestContext> {
        let router = Router(context: ServiceRequestContext.self)
        router.add(middleware: ErrorMiddleware())
        router.add(middleware: InputCharactersMiddleware())
        router.add(middleware: LogRequestsMiddleware(.debug))
        router.add(middleware: MetricsMiddleware())
        router.add(middleware: ActivityMiddleware(activity: activity))
        HealthRoutes.add(to: router, service: configuration.serviceName, checks: readinessChecks)
        return router
    }

    /// The middleware that requires a valid bearer token; add it to every API group.
    package var authentication: AuthenticationMiddleware { AuthenticationMiddleware(verifier: verifier) }

    /// The application to run: the HTTP server on the configured address with every platform service, and
    /// `servicesShutDownFirst` (e.g. realtime servers) that shut down before the HTTP server.
    /// - Parameter server: the HTTP server builder, e.g. one that upgrades WebSockets; by default HTTP/1.1 that
    ///   closes connections idle for `HTTP_IDLE_TIMEOUT_SECONDS`.
    package func makeApplication(
        router: Router<ServiceRequestContext>, server: HTTPServerBuilder? = nil,
        servicesShutDownFirst: [any Service] = []
    ) -> ServiceApplication {
        let application = Application(
            router: router,
            server: server ?? .http1(configuration: .init(idleTimeout: TimeAmount(configuration.http.idleTimeout))),
            configuration: .init(
                address: .hostname(configuration.http.host, port: configuration.http.port),
                serverName: configuration.serviceName, backlog: configuration.http.listenBacklog
            ),
            services: services,
            logger: logger
        )
        return ServiceApplication(
            application: application, servicesShutDownFirst: servicesShutDownFirst, consumers: consumers,
            port: configuration.http.port, logger: logger
        )
    }

    private static func migrate(configuration: ServiceConfiguration, sets: [MigrationSet], logger: Logger) async throws
    {
        let client = Database.makeClient(configuration.database, logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await Database.waitForServer(
                client,
                description:
                    "Postgres at \(configuration.database.host):\(configuration.database.port)/\(configuration.database.database)",
                timeout: .seconds(30), logger: logger
            )
            try await Migrator.apply(sets, schema: configuration.database.schema, client: client, logger: logger)
        }
    }

    /// Creates the system's topics; if the broker is away the service still starts (and `/ready` says so).
    private static func createTopics(configuration: ServiceConfiguration, logger: Logger) async {
        let topics = Topic.all.map {
            KafkaTopicSpecification(
                name: $0.rawValue, partitions: configuration.kafka.topicPartitions,
                replicationFactor: configuration.kafka.topicReplicationFactor,
                configs: $0.retention.map { ["retention.ms": String($0.milliseconds)] } ?? [:]
            )
        }
        do {
            try await KafkaAdmin.createTopics(
                topics, client: configuration.kafka.clientConfiguration(clientId: configuration.serviceName),
                timeout: .seconds(5), logger: logger
            )
        } catch {
            logger.warning(
                "could not create the Kafka topics; continuing (the broker may be down)",
                metadata: ["error": "\(error)", "kafka.library": "\(KafkaLibrary.description)"]
            )
        }
    }
}

/// A dependency stayed unreachable at start-up.
package struct DependencyUnavailable: Error, CustomStringConvertible {
    package var what: String
    package var reason: String
    package var description: String { "\(what) is unreachable: \(reason)" }
}
