import Foundation
import Kafka
import Logging

/// Everything every service reads from its environment. Service-specific settings come from the same
/// ``ServiceEnvironment`` in each service's own configuration type.
package struct ServiceConfiguration: Sendable {
    /// e.g. `order-service`: the log label, the Kafka client id and consumer-group prefix.
    package var serviceName: String
    package var http: HTTPSettings
    package var database: DatabaseSettings
    package var kafka: KafkaSettings
    package var auth: AuthSettings
    package var outbox: OutboxSettings
    package var logLevel: Logger.Level

    package struct HTTPSettings: Sendable {
        /// `HTTP_HOST`, default `127.0.0.1` (local only; a container sets `0.0.0.0` explicitly).
        package var host: String
        /// `HTTP_PORT`, default the service's own (8081-8085).
        package var port: Int
        /// `HTTP_LISTEN_BACKLOG`, default ``defaultListenBacklog``: connections the kernel queues before they are
        /// accepted (capped by `net.core.somaxconn`).
        package var listenBacklog: Int
        /// `HTTP_IDLE_TIMEOUT_SECONDS`, default 90: how long a connection may sit with no request in flight (before
        /// its first, between two, or reading one) before it is closed. Longer than a proxy's idle upstream
        /// connections live (nginx: 60 s), so the proxy, not the service, closes them.
        package var idleTimeout: Duration
        /// `HTTP_FIRST_REQUEST_TIMEOUT_SECONDS`, default 30: how long a connection to a service with sockets may
        /// take to send the head of its first request (a WebSocket upgrade or a request) before it is closed.
        package var firstRequestTimeout: Duration

        /// The listen backlog when none is configured: Linux's default `somaxconn` since 5.4. Hummingbird's 256
        /// overflowed when thousands of phones reconnected at once, each dropped SYN costing a second's retry.
        package static let defaultListenBacklog = 4096
    }

    package struct DatabaseSettings: Sendable {
        package var host: String
        package var port: Int
        package var username: String
        package var password: String?
        package var database: String
        /// `DATABASE_SCHEMA`: the schema this service owns; its tables and migrations live there.
        package var schema: String
        /// The service's name, which Postgres shows as the `application_name` of its connections.
        package var applicationName: String
        /// `DATABASE_POOL_SIZE`, default 20.
        package var maximumConnections: Int
        /// `DATABASE_TLS`: `disable`, `prefer` (default) or `require`.
        package var tls: TLSMode

        package enum TLSMode: String, Sendable, CaseIterable {
            case disable
            case prefer
            case require
        }
    }

    package struct KafkaSettings: Sendable {
        /// `KAFKA_BROKERS`: comma-separated `host:port`.
        package var brokers: [String]
        /// `KAFKA_PROPERTIES`: extra librdkafka properties, `key=value;key=value`, applied last.
        package var additionalProperties: [String: String]
        /// `KAFKA_TOPIC_PARTITIONS`, default 3: partitions of topics this service creates.
        package var topicPartitions: Int
        /// `KAFKA_TOPIC_REPLICATION`, default 1.
        package var topicReplicationFactor: Int
        /// `KAFKA_GROUP_PREFIX`, default empty: prefixed to consumer-group ids, e.g. per environment.
        package var groupPrefix: String
        /// `KAFKA_DELIVERY_TIMEOUT_MS`, default 30000: how long a publish may wait for the broker's ack.
        package var deliveryTimeout: Duration

        package func clientConfiguration(clientId: String) -> KafkaClientConfiguration {
            KafkaClientConfiguration(
                bootstrapServers: brokers, clientId: clientId, additionalProperties: additionalProperties
            )
        }
    }

    package struct AuthSettings: Sendable {
        /// `JWT_ISSUER`: the `iss` every token must carry.
        package var issuer: String
        /// `JWT_AUDIENCE`: the `aud` (or Cognito `client_id`) every token must carry.
        package var audience: String
        package var keySource: JWTKeySource
        /// `JWT_LEEWAY_SECONDS`, default 60: the clock skew allowed on `exp`, `nbf` and `iat`.
        package var leeway: Duration
        /// `JWT_JWKS_REFRESH_SECONDS`, default 3600: how often a `JWT_JWKS_URL` key set is fetched again.
        package var jwksRefreshInterval: Duration
        /// The least time between two fetches of a `JWT_JWKS_URL` key set caused by tokens naming an unknown
        /// `kid` (30 s).
        package var jwksMinimumRefetchInterval: Duration

        package init(
            issuer: String, audience: String, keySource: JWTKeySource, leeway: Duration = .seconds(60),
            jwksRefreshInterval: Duration = .seconds(3600), jwksMinimumRefetchInterval: Duration = .seconds(30)
        ) {
            self.issuer = issuer
            self.audience = audience
            self.keySource = keySource
            self.leeway = leeway
            self.jwksRefreshInterval = jwksRefreshInterval
            self.jwksMinimumRefetchInterval = jwksMinimumRefetchInterval
        }
    }

    package struct OutboxSettings: Sendable {
        /// `OUTBOX_POLL_INTERVAL_MS`, default 1000: how often rows are looked for while some wait out a back-off
        /// (a minute after the last failed publish, and the first minute of leading).
        package var pollInterval: Duration
        /// `OUTBOX_IDLE_POLL_INTERVAL_MS`, default 30000: how often otherwise, the fallback should a NOTIFY be
        /// missed (commits wake the relay at once).
        package var idlePollInterval: Duration
        /// `OUTBOX_BATCH_SIZE`, default 500.
        package var batchSize: Int
        /// `OUTBOX_RETENTION_HOURS`, default 168: how long published rows are kept for inspection.
        package var retention: Duration
    }

    /// Reads the configuration of service `serviceName`.
    /// - Throws: ``ConfigurationError`` naming the first missing or invalid variable.
    package init(
        serviceName: String, defaultPort: Int, defaultSchema: String, environment: ServiceEnvironment
    ) throws(ConfigurationError) {
        self.serviceName = serviceName
        self.http = HTTPSettings(
            host: environment.optional("HTTP_HOST") ?? "127.0.0.1",
            port: try environment.int("HTTP_PORT", default: defaultPort, in: 0...65535),
            listenBacklog: try environment.int(
                "HTTP_LISTEN_BACKLOG", default: HTTPSettings.defaultListenBacklog, in: 1...65535),
            idleTimeout: try environment.seconds("HTTP_IDLE_TIMEOUT_SECONDS", default: .seconds(90), in: 1...86400),
            firstRequestTimeout: try environment.seconds(
                "HTTP_FIRST_REQUEST_TIMEOUT_SECONDS", default: .seconds(30), in: 1...3600)
        )
        self.database = try DatabaseSettings(
            environment: environment, defaultSchema: defaultSchema, applicationName: serviceName)
        let brokers = try environment.required("KAFKA_BROKERS", meaning: "Kafka bootstrap servers, e.g. 127.0.0.1:9092")
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        self.kafka = KafkaSettings(
            brokers: brokers,
            additionalProperties: try environment.keyValuePairs("KAFKA_PROPERTIES"),
            topicPartitions: try environment.int("KAFKA_TOPIC_PARTITIONS", default: 3, in: 1...1000),
            topicReplicationFactor: try environment.int("KAFKA_TOPIC_REPLICATION", default: 1, in: 1...10),
            groupPrefix: environment.optional("KAFKA_GROUP_PREFIX") ?? "",
            deliveryTimeout: try environment.milliseconds(
                "KAFKA_DELIVERY_TIMEOUT_MS", default: .seconds(30), in: 1_000...600_000
            )
        )
        self.auth = AuthSettings(
            issuer: try environment.required("JWT_ISSUER", meaning: "the iss claim tokens must carry"),
            audience: try environment.required("JWT_AUDIENCE", meaning: "the aud claim tokens must carry"),
            keySource: try JWTKeySource(environment: environment),
            leeway: try environment.seconds("JWT_LEEWAY_SECONDS", default: .seconds(60), in: 0...600),
            jwksRefreshInterval: try environment.seconds(
                "JWT_JWKS_REFRESH_SECONDS", default: .seconds(3600), in: 60...86_400)
        )
        self.outbox = OutboxSettings(
            pollInterval: try environment.milliseconds(
                "OUTBOX_POLL_INTERVAL_MS", default: .seconds(1), in: 10...60_000
            ),
            idlePollInterval: try environment.milliseconds(
                "OUTBOX_IDLE_POLL_INTERVAL_MS", default: .seconds(30), in: 10...3_600_000
            ),
            batchSize: try environment.int("OUTBOX_BATCH_SIZE", default: 500, in: 1...10_000),
            retention: .seconds(3600 * (try environment.int("OUTBOX_RETENTION_HOURS", default: 168, in: 1...8760)))
        )
        self.logLevel = try environment.choice("LOG_LEVEL", default: Logger.Level.info)
    }
}

extension ServiceConfiguration.DatabaseSettings {
    init(environment: ServiceEnvironment, defaultSchema: String, applicationName: String) throws(ConfigurationError) {
        let meaning = "Postgres URL, e.g. postgres://user:password@127.0.0.1:5432/delivery"
        let text = try environment.required("DATABASE_URL", meaning: meaning)
        guard let components = URLComponents(string: text),
            components.scheme == "postgres" || components.scheme == "postgresql",
            let host = components.host, !host.isEmpty
        else {
            throw ConfigurationError(variable: "DATABASE_URL", problem: "not a Postgres URL (\(meaning))")
        }
        let database = components.path.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        guard !database.isEmpty else {
            throw ConfigurationError(variable: "DATABASE_URL", problem: "names no database (\(meaning))")
        }
        let schema = environment.optional("DATABASE_SCHEMA") ?? defaultSchema
        guard schema.range(of: "^[a-z_][a-z0-9_]{0,62}$", options: .regularExpression) != nil else {
            throw ConfigurationError(
                variable: "DATABASE_SCHEMA",
                problem: "'\(schema)' must be lower-case letters, digits and underscores, starting with a letter"
            )
        }
        self.init(
            host: host,
            port: components.port ?? 5432,
            username: components.user?.removingPercentEncoding ?? "postgres",
            password: components.password?.removingPercentEncoding,
            database: database,
            schema: schema,
            applicationName: applicationName,
            maximumConnections: try environment.int("DATABASE_POOL_SIZE", default: 20, in: 1...500),
            tls: try environment.choice("DATABASE_TLS", default: TLSMode.prefer)
        )
    }
}
