import Foundation
import PostgresNIO
import ServiceKit
import TestSupport
import Testing

/// The pool a service gets from `Database.makeClient`: named after the service, kept alive by Postgres's TCP probes
/// rather than by timed keep-alive queries, and whole after an outage under load.
@Suite("Connection pool", .timeLimit(.minutes(1)))
struct ConnectionPoolTests {
    /// Runs `body` with the pool `Database.makeClient` makes for service `name`, the test environment and `extra`.
    static func withPool(
        named name: String, extra: [String: String] = [:], _ body: @Sendable (Database) async throws -> Void
    ) async throws {
        let schema = uniqueName("pool")
        let settings = try ServiceConfiguration(
            serviceName: name, defaultPort: 0, defaultSchema: schema,
            environment: try testServiceEnvironment(schema: schema, extra: extra)
        ).database
        let logger = TestInfrastructure.logger("pool")
        let client = Database.makeClient(settings, logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await Database.waitForServer(
                client, description: "the test Postgres", timeout: .seconds(10), logger: logger)
            try await body(Database(client: client, schema: schema, logger: logger))
        }
    }

    @Test("Postgres sees the service's name and its TCP keep-alive settings on the pool's connections")
    func startupParameters() async throws {
        let name = uniqueName("pool")
        try await Self.withPool(named: name) { database async throws in
            #expect(try await database.scalar("SHOW application_name", as: String.self) == name)
            #expect(try await database.scalar("SHOW tcp_keepalives_idle", as: String.self) == "60")
            #expect(try await database.scalar("SHOW tcp_keepalives_interval", as: String.self) == "10")
            #expect(try await database.scalar("SHOW tcp_keepalives_count", as: String.self) == "3")
        }
    }

    @Test("a pool that could not reach Postgres serves the queries that waited for it, and new ones, once it can")
    func outageUnderLoad() async throws {
        let role = uniqueName("pool")
        try await withTestDatabase { admin in
            try await admin.client.query("CREATE ROLE \(unescaped: role) LOGIN", logger: admin.logger)
            var url = URLComponents(string: try TestInfrastructure.databaseURL())!
            url.user = role
            try await Self.withPool(named: role, extra: ["DATABASE_URL": url.string!]) { database in
                let query: @Sendable () async throws -> Int? = {
                    try await database.scalar("SELECT 1 FROM pg_sleep(0.02)", as: Int.self)
                }
                try await withThrowingTaskGroup(of: Int?.self) { queries in
                    for _ in 0..<6 { queries.addTask(operation: query) }
                    for try await value in queries { #expect(value == 1) }
                }

                try await admin.client.query("ALTER ROLE \(unescaped: role) NOLOGIN", logger: admin.logger)
                try await admin.client.query(
                    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = \(role)",
                    logger: admin.logger)
                try await withThrowingTaskGroup(of: Int?.self) { queries in
                    for _ in 0..<10 { queries.addTask(operation: query) }
                    // The pool now fails to open connections and queues the queries; let it back in.
                    try await Task.sleep(for: .milliseconds(500))
                    try await admin.client.query("ALTER ROLE \(unescaped: role) LOGIN", logger: admin.logger)
                    // A new query every 2 ms while the pool opens its connections again. A pool with a minimum
                    // (postgres-nio's `minimumConnections` 10) fails a precondition here and the process crashes.
                    for _ in 0..<300 {
                        queries.addTask(operation: query)
                        try await Task.sleep(for: .milliseconds(2))
                    }
                    for try await value in queries { #expect(value == 1) }
                }
            }
            try await admin.client.query("DROP ROLE \(unescaped: role)", logger: admin.logger)
        }
    }
}
