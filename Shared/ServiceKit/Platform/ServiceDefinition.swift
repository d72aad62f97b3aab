import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization

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
    /// Adds the service's routes, consumers and background services to `platform` and returns the application
    /// (``ServicePlatform/makeApplication(router:server:servicesShutDownFirst:)``).
    static func makeApplication(platform: ServicePlatform, environment: ServiceEnvironment) async throws
        -> ServiceApplication
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

    /// Builds the runnable application, exactly as the executable does; tests call this too (with the `now` of a
    /// clock they step, to test deadlines without waiting).
    package static func buildApplication(
        configuration: ServiceConfiguration, environment: ServiceEnvironment, logger: Logger, now: Now = .system
    ) async throws -> ServiceApplication {
        let platform = try await ServicePlatform.prepare(
            configuration: configuration, migrations: try migrations(), logger: logger, now: now
        )
        return try await makeApplication(platform: platform, environment: environment)
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

/// What a service runs: its HTTP application (with the platform's services) and the services that shut down
/// before the HTTP server (realtime servers, so their sockets get a proper DISCONNECT).
package struct ServiceApplication: Sendable {
    package let application: any ApplicationProtocol
    package let servicesShutDownFirst: [any Service]
    /// The service's event consumers (run among the application's services).
    package let consumers: [EventConsumer]
    /// The configured HTTP port.
    package let port: Int
    package let logger: Logger

    /// Every service of the application, in start order (shutdown runs in reverse).
    package var services: [any Service] { [application] + servicesShutDownFirst }

    /// How long a graceful shutdown may take before what is left is cancelled, and when the process ends
    /// regardless: a stop must end within the 10 s an orchestrator (and the restart tests) give before SIGKILL, even
    /// while Postgres is down.
    package static let maximumGracefulShutdown: Duration = .seconds(6)
    package static let stopDeadline: Duration = .milliseconds(8500)

    /// Runs until SIGTERM or SIGINT, then shuts down gracefully; services still running
    /// ``maximumGracefulShutdown`` later are cancelled, and at ``stopDeadline`` the process ends (status 0, with a
    /// warning) whatever is still running: the outbox keeps what was not published, the inbox what was not
    /// applied. Returns normally once a requested stop ended (a service that ends on its own, or fails, throws).
    package func run() async throws {
        let stopRequested = StopRequest(deadline: Self.stopDeadline, logger: logger)
        var configuration = ServiceGroupConfiguration(
            services: services + [stopRequested], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = Self.maximumGracefulShutdown
        do {
            try await ServiceGroup(configuration: configuration).run()
        } catch  where stopRequested.requested {
            logger.warning(
                "stopped after cancelling what had not stopped within \(Self.maximumGracefulShutdown)",
                metadata: ["error": "\(error)"])
        }
    }
}

/// A service that notes that a graceful stop was requested and arms the deadline at which the process ends.
private final class StopRequest: Service, Sendable {
    private let flag = Atomic<Bool>(false)
    private let deadline: Duration
    private let logger: Logger
    var requested: Bool { flag.load(ordering: .relaxed) }

    init(deadline: Duration, logger: Logger) {
        self.deadline = deadline
        self.logger = logger
    }

    func run() async throws {
        guard (try? await gracefulShutdown()) != nil else { return }
        flag.store(true, ordering: .relaxed)
        // A watchdog outside the cooperative pool: it fires even if a stuck part of the shutdown never yields.
        let logger = self.logger
        let deadline = self.deadline
        DispatchQueue.global().asyncAfter(deadline: .now() + deadline.timeInterval) {
            logger.warning("the stop did not end within \(deadline); exiting with what is still running abandoned")
            fflush(nil)
            _exit(0)
        }
    }
}
