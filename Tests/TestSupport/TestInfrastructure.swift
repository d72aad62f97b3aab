import Contracts
import Foundation
import JWTKit
import Kafka
import Logging
import RealtimeTesting
import ServiceKit
import Synchronization

/// What `make test` starts for the tests: a throwaway Postgres and a Tansu broker, named in the environment.
/// Integration tests fail (they are not skipped) when it is missing.
package enum TestInfrastructure {
    package struct Missing: Error, CustomStringConvertible {
        package var variable: String
        package var description: String {
            "\(variable) is not set: run the tests with `make test`, which starts Postgres and the broker"
        }
    }

    package static func variable(_ name: String) throws -> String {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
            throw Missing(variable: name)
        }
        return value
    }

    /// `postgres://...` of the test cluster.
    package static func databaseURL() throws -> String { try variable("TEST_DATABASE_URL") }
    /// `host:port` of the shared test broker.
    package static func kafkaBrokers() throws -> String { try variable("TEST_KAFKA_BROKERS") }
    /// The Tansu binary, for tests that start and stop a broker of their own.
    package static func tansuBinary() throws -> String { try variable("TEST_TANSU_BIN") }
    /// The folder holding the built executables.
    package static func binPath() throws -> String { try variable("TEST_BIN_PATH") }
    /// The project's Python with python-socketio and confluent-kafka.
    package static func python() throws -> String { try variable("TEST_PYTHON") }

    /// A logger for tests: warnings and up, unless `LOG_LEVEL` says otherwise.
    package static func logger(_ label: String) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel =
            ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
        return logger
    }
}

private let counter = Atomic<Int>(0)

/// A name no other test in this run uses: lower-case letters, digits and underscores (valid as a schema,
/// a topic or a consumer group).
package func uniqueName(_ prefix: String) -> String {
    let suffix = UUID().uuidString.prefix(8).lowercased()
    return "\(prefix)_\(counter.add(1, ordering: .relaxed).newValue)_\(suffix)"
}

/// The token issuer every in-process service under test trusts: one ES256 key per test process.
package enum TestAuth {
    package static let issuerName = "https://auth.test.local"
    package static let audience = "delivery-platform-tests"
    package static let issuer = TokenIssuer(privateKey: ES256PrivateKey(), issuer: issuerName, audience: audience)

    /// The public key, written once to a temporary file for `JWT_PUBLIC_KEY_FILE`.
    package static let publicKeyFile: String = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("test-jwt-\(UUID().uuidString).pem")
        try! Data(issuer.publicKeyPEM.utf8).write(to: url)
        return url.path
    }()

    /// A valid token for `userId` acting as `role`.
    package static func token(_ userId: String, _ role: Role, name: String? = nil) async throws -> String {
        try await issuer.token(userId: userId, role: role, name: name)
    }
}

/// The environment of a service under test: the test Postgres (in a schema of its own), the given broker,
/// the test token issuer, an ephemeral port and group ids no other test shares.
package func testServiceEnvironment(
    schema: String = uniqueName("svc"), brokers: String? = nil, extra: [String: String] = [:]
) throws -> ServiceEnvironment {
    var values = [
        "DATABASE_URL": try TestInfrastructure.databaseURL(),
        "DATABASE_SCHEMA": schema,
        "DATABASE_TLS": "disable",
        "DATABASE_POOL_SIZE": "10",
        "KAFKA_BROKERS": try brokers ?? TestInfrastructure.kafkaBrokers(),
        "KAFKA_GROUP_PREFIX": "\(schema).",
        "JWT_ISSUER": TestAuth.issuerName,
        "JWT_AUDIENCE": TestAuth.audience,
        "JWT_PUBLIC_KEY_FILE": TestAuth.publicKeyFile,
        "HTTP_HOST": "127.0.0.1",
        "HTTP_PORT": String(TestPorts.allocate()),
        "OUTBOX_POLL_INTERVAL_MS": "200",
    ]
    values.merge(extra) { _, new in new }
    return ServiceEnvironment(values)
}

/// A value shared between a test and the tasks it starts.
package final class Locked<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>
    package init(_ value: Value) { storage = Mutex(value) }
    package func withLock<T: Sendable>(_ body: (inout Value) -> T) -> T { storage.withLock { body(&$0) } }
    package var value: Value { storage.withLock { $0 } }
}
