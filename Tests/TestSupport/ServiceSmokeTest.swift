import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RealtimeTesting
import ServiceKit
import Testing

/// Builds `Service` exactly as its executable does (test Postgres in a fresh schema, test broker) and checks that
/// it serves `/health`, `/ready` (once Postgres and the broker answer), `/metrics`, and that its migrations and
/// ServiceKit's were applied into its own schema.
package func expectServiceStarts<Service: ServiceDefinition>(
    _ service: Service.Type, extra: [String: String] = [:]
) async throws {
    let schema = uniqueName(Service.defaultSchema)
    let environment = try testServiceEnvironment(schema: schema, extra: extra)
    let app = try await Service.buildApplication(
        configuration: try Service.configuration(environment: environment), environment: environment,
        logger: TestInfrastructure.logger(Service.name)
    )
    try await withRunningService(app) { client in
        let health = try await client.get("/health")
        #expect(health.status == 200)
        #expect(health.text.contains(Service.name))
        try await eventually("\(Service.name) ready") { try await client.get("/ready").status == 200 }
        let metrics = try await client.get("/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.headers["content-type"]?.hasPrefix("text/plain") == true)
        #expect(metrics.text.contains("# TYPE"))
        let unknown = try await client.get("/v1/no-such-thing")
        #expect(unknown.status == 404 || unknown.status == 401)
    }
    let platformMigrations = try await withTestDatabase(schema: schema, migrations: []) { database in
        try await database.scalar("SELECT count(*) FROM schema_migrations WHERE component = 'platform'", as: Int.self)
    }
    #expect(platformMigrations == (try MigrationSet.platform()).migrations.count)
}
