import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// Runs `body` with a ``Database`` on the test cluster in schema `schema`, its client running for the duration.
/// - Parameter migrations: applied first (ServiceKit's own tables unless told otherwise).
package func withTestDatabase<Result: Sendable>(
    schema: String = uniqueName("db"), migrations: [MigrationSet]? = nil,
    _ body: @Sendable (Database) async throws -> Result
) async throws -> Result {
    let settings = try ServiceConfiguration(
        serviceName: "test", defaultPort: 0, defaultSchema: schema,
        environment: try testServiceEnvironment(schema: schema)
    ).database
    let logger = TestInfrastructure.logger("test-db")
    let client = Database.makeClient(settings, logger: logger)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await client.run() }
        defer { group.cancelAll() }
        try await Database.waitForServer(
            client, description: "the test Postgres", timeout: .seconds(10), logger: logger)
        try await Migrator.apply(
            try migrations ?? [MigrationSet.platform()], schema: schema, client: client, logger: logger)
        return try await body(Database(client: client, schema: schema, logger: logger))
    }
}

extension Database {
    /// The single value of a one-row, one-column query, e.g. a count.
    package func scalar<T: PostgresDecodable & Sendable>(_ query: PostgresQuery, as type: T.Type = T.self) async throws
        -> T?
    {
        let rows = try await client.query(query, logger: logger)
        for try await value in rows.decode(T.self) { return value }
        return nil
    }
}
