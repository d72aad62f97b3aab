import Foundation
import Hummingbird
import Logging

/// What a service executable runs: read the environment, build, run until SIGTERM or SIGINT.
package enum ServiceMain {
    /// Exit status for a configuration error (sysexits' EX_CONFIG).
    package static let configurationErrorExitCode: Int32 = 78

    /// Runs a service. A configuration error is printed naming the variable, and exits with status 78; any
    /// other start-up failure is logged and exits with status 1.
    /// - Parameters:
    ///   - name: the service name, e.g. `order-service`.
    ///   - build: builds the application from the common configuration and the environment.
    package static func run(
        name: String, defaultPort: Int, defaultSchema: String,
        build: (ServiceConfiguration, ServiceEnvironment, Logger) async throws -> ServiceApplication
    ) async -> Never {
        let environment = ServiceEnvironment.process
        let configuration: ServiceConfiguration
        do {
            configuration = try ServiceConfiguration(
                serviceName: name, defaultPort: defaultPort, defaultSchema: defaultSchema, environment: environment
            )
        } catch {
            FileHandle.standardError.write(Data("\(name): configuration error: \(error)\n".utf8))
            exit(configurationErrorExitCode)
        }
        ServiceLogging.bootstrap(service: name, level: configuration.logLevel)
        ServiceMetrics.bootstrap()
        let logger = ServiceLogging.logger(service: name, level: configuration.logLevel)
        do {
            let app = try await build(configuration, environment, logger)
            try await app.run()
            logger.info("stopped")
            exit(0)
        } catch let error as ConfigurationError {
            logger.critical("configuration error: \(error)")
            FileHandle.standardError.write(Data("\(name): configuration error: \(error)\n".utf8))
            exit(configurationErrorExitCode)
        } catch {
            logger.critical("failed: \(String(describing: error))")
            exit(1)
        }
    }
}
