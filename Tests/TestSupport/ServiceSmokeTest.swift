import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import ServiceKit
import Testing

/// Builds `Service` exactly as its executable does (test Postgres in a fresh schema, test broker) and checks that
/// it serves `/health`, `/ready` (once Postgres and the broker answer), `/metrics`, and that its migrations and
/// ServiceKit's were applied into its own schema.
package func expectServiceStarts<Service: ServiceDefinition>(_ service: Service.Type) async throws {
    let schema = uniqueName(Service.defaultSchema)
    let environment = try testServiceEnvironment(schema: schema)
    let app = try await Service.buildApplication(
        configuration: try Service.configuration(environment: environment), environment: environment,
        logger: TestInfrastructure.logger(Service.name)
    )
    try await app.test(.live) { client in
        let health = try await client.execute(uri: "/health", method: .get)
        #expect(health.status == .ok)
        #expect(String(buffer: health.body).contains(Service.name))
        try await eventually("\(Service.name) ready") {
            try await client.execute(uri: "/ready", method: .get).status == .ok
        }
        let metrics = try await client.execute(uri: "/metrics", method: .get)
        #expect(metrics.status == .ok)
        #expect(metrics.headers[.contentType]?.hasPrefix("text/plain") == true)
        #expect(String(buffer: metrics.body).contains("# TYPE"))
        let unknown = try await client.execute(uri: "/v1/no-such-thing", method: .get)
        #expect(unknown.status == .notFound || unknown.status == .unauthorized)
    }
    let platformMigrations = try await withTestDatabase(schema: schema, migrations: []) { database in
        try await database.scalar("SELECT count(*) FROM schema_migrations WHERE component = 'platform'", as: Int.self)
    }
    #expect(platformMigrations == (try MigrationSet.platform()).migrations.count)
}
