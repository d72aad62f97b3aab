import Foundation
import ServiceKit
import TestSupport
import Testing

@Suite("Configuration from the environment")
struct ConfigurationTests {
    let complete = [
        "DATABASE_URL": "postgres://app:s%40cret@db.internal:6543/delivery",
        "KAFKA_BROKERS": "k1:9092, k2:9092",
        "JWT_ISSUER": "https://issuer", "JWT_AUDIENCE": "app", "JWT_PUBLIC_KEY_FILE": "/keys/jwt.pem",
    ]

    func configuration(_ values: [String: String]) throws(ConfigurationError) -> ServiceConfiguration {
        try ServiceConfiguration(
            serviceName: "order-service", defaultPort: 8081, defaultSchema: "orders",
            environment: ServiceEnvironment(values)
        )
    }

    @Test("a complete environment is read with its defaults")
    func completeEnvironment() throws {
        let configuration = try configuration(complete)
        #expect(configuration.http.port == 8081)
        #expect(configuration.http.host == "127.0.0.1", "services listen on loopback unless told otherwise")
        #expect(configuration.http.listenBacklog == 4096)
        #expect(configuration.http.idleTimeout == .seconds(90))
        #expect(configuration.http.firstRequestTimeout == .seconds(30))
        #expect(configuration.database.host == "db.internal")
        #expect(configuration.database.port == 6543)
        #expect(configuration.database.username == "app")
        #expect(configuration.database.password == "s@cret")
        #expect(configuration.database.database == "delivery")
        #expect(configuration.database.schema == "orders")
        #expect(configuration.database.applicationName == "order-service")
        #expect(configuration.kafka.brokers == ["k1:9092", "k2:9092"])
        #expect(configuration.auth.keySource == .publicKeyFile("/keys/jwt.pem"))
        #expect(configuration.outbox.pollInterval == .seconds(1))
        #expect(configuration.auth.leeway == .seconds(60))
        #expect(configuration.auth.jwksRefreshInterval == .seconds(3600))
    }

    @Test("the token leeway and the key set refresh interval are read")
    func tokenTiming() throws {
        var values = complete
        values["JWT_LEEWAY_SECONDS"] = "0"
        values["JWT_JWKS_REFRESH_SECONDS"] = "600"
        let auth = try configuration(values).auth
        #expect(auth.leeway == .zero)
        #expect(auth.jwksRefreshInterval == .seconds(600))
    }

    @Test(
        "each missing required variable is named",
        arguments: ["DATABASE_URL", "KAFKA_BROKERS", "JWT_ISSUER", "JWT_AUDIENCE", "JWT_PUBLIC_KEY_FILE"])
    func missing(variable: String) {
        var values = complete
        values[variable] = nil
        #expect {
            try configuration(values)
        } throws: { error in
            (error as? ConfigurationError)?.variable == variable && "\(error)".contains("required")
        }
    }

    @Test(
        "invalid values are refused with the variable's name",
        arguments: [
            ("HTTP_PORT", "eighty"), ("HTTP_PORT", "70000"), ("HTTP_LISTEN_BACKLOG", "0"),
            ("HTTP_IDLE_TIMEOUT_SECONDS", "0"), ("HTTP_FIRST_REQUEST_TIMEOUT_SECONDS", "soon"),
            ("DATABASE_URL", "mysql://x/y"),
            ("DATABASE_URL", "postgres://host"),
            ("DATABASE_SCHEMA", "Orders;DROP"), ("KAFKA_PROPERTIES", "novalue"), ("LOG_LEVEL", "loud"),
            ("JWT_JWKS_URL", "not a url"), ("OUTBOX_POLL_INTERVAL_MS", "0"), ("DATABASE_TLS", "maybe"),
            ("JWT_LEEWAY_SECONDS", "-1"), ("JWT_LEEWAY_SECONDS", "3600"), ("JWT_JWKS_REFRESH_SECONDS", "5"),
        ]
    )
    func invalid(variable: String, value: String) {
        var values = complete
        values[variable] = value
        if variable == "JWT_JWKS_URL" { values["JWT_PUBLIC_KEY_FILE"] = nil }
        #expect {
            try configuration(values)
        } throws: { error in
            (error as? ConfigurationError)?.variable == variable
        }
    }

    @Test("two key sources at once are refused")
    func twoKeySources() {
        var values = complete
        values["JWT_JWKS_FILE"] = "/keys/jwks.json"
        #expect(throws: ConfigurationError.self) { try configuration(values) }
    }

    @Test("librdkafka properties pass through")
    func kafkaProperties() throws {
        var values = complete
        values["KAFKA_PROPERTIES"] = "max.poll.interval.ms=300000; debug=broker,topic;"
        #expect(
            try configuration(values).kafka.additionalProperties == [
                "max.poll.interval.ms": "300000", "debug": "broker,topic",
            ]
        )
    }

    @Test(
        "every service executable started without its environment exits non-zero naming the variable",
        arguments: ["order-service", "chat-service", "allocation-service", "location-service", "notification-service"]
    )
    func executableRefusesToStart(executable: String) async throws {
        let process = try ChildProcess(
            executable: URL(fileURLWithPath: try TestInfrastructure.binPath()).appendingPathComponent(executable).path,
            arguments: [],
            environment: [
                "PATH": "/usr/bin:/bin",
                "LD_LIBRARY_PATH": ProcessInfo.processInfo.environment["LD_LIBRARY_PATH"] ?? "",
            ]
        )
        #expect(await process.exitStatus() == 78)
        #expect(process.output.contains("DATABASE_URL"), "output was: \(process.output)")
    }
}
