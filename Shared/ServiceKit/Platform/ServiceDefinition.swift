import Foundation
import Hummingbird
import Logging

/// A service of the platform: its name, defaults, migrations, and what it adds to the shared platform (routes,
/// consumers, background services). The executable is then one line: `await ServiceMain.run(MyService.self)`.
package protocol ServiceDefinition {
    /// e.g. `order-service`.
    static var name: String { get }
    /// The HTTP port when `HTTP_PORT` is not set.
    static var defaultPort: Int { get }
    /// The Postgres schema when `DATABASE_SCHEMA` is not set.
    static var defaultSchema: String { get }
    /// The service's own migrations (applied after ServiceKit's).
    static func migrations() throws -> MigrationSet
    /// Adds routes under `router`, and consumers and services to `platform`.
    static func configure(
        _ platform: inout ServicePlatform, router: Router<ServiceRequestContext>, environment: ServiceEnvironment
    ) async throws
}

extension ServiceDefinition {
    /// Reads the common configuration for this service.
    package static func configuration(environment: ServiceEnvironment) throws(ConfigurationError)
        -> ServiceConfiguration
    {
        try ServiceConfiguration(
            serviceName: name, defaultPort: defaultPort, defaultSchema: defaultSchema, environment: environment
        )
    }

    /// Builds the runnable application, exactly as the executable does; tests call this too.
    package static func buildApplication(
        configuration: ServiceConfiguration, environment: ServiceEnvironment, logger: Logger
    ) async throws -> some ApplicationProtocol {
        var platform = try await ServicePlatform.prepare(
            configuration: configuration, migrations: try migrations(), logger: logger
        )
        let router = platform.makeRouter()
        try await configure(&platform, router: router, environment: environment)
        return platform.makeApplication(router: router)
    }
}

extension MigrationSet {
    /// The `Migrations` resource folder of a service's bundle.
    package init(component: String, bundle: Bundle) throws {
        guard let directory = bundle.url(forResource: "Migrations", withExtension: nil) else {
            throw MigrationError(
                component: component, version: nil, message: "no Migrations folder in \(bundle.bundlePath)")
        }
        try self.init(component: component, directory: directory)
    }
}

extension ServiceMain {
    /// Runs `Service` as this process.
    package static func run<Service: ServiceDefinition>(_ service: Service.Type) async -> Never {
        await run(name: Service.name, defaultPort: Service.defaultPort, defaultSchema: Service.defaultSchema) {
            configuration, environment, logger in
            try await Service.buildApplication(configuration: configuration, environment: environment, logger: logger)
        }
    }
}
