import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOPosix

/// What a service executable runs: read the environment, build, run until SIGTERM or SIGINT.
package enum ServiceMain {
    /// Exit status for a configuration error (sysexits' EX_CONFIG).
    package static let configurationErrorExitCode: Int32 = 78

    /// Makes Swift Concurrency run its tasks on the process's SwiftNIO event loops, so that an `await` on a socket
    /// or a Postgres query resumes without a hop between two thread pools. Call it first, before anything is
    /// awaited: `main.swift` does. Nothing in the services blocks a thread that runs tasks (the Kafka clients poll
    /// on threads of their own). Chat at 500 messages a second on two instances: service CPU 77% of a core to 64%,
    /// delivery p99 20-35 ms to 14-19 ms (docs/benchmarks.md).
    package static func runTasksOnEventLoops() {
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
    }

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
            end(status: configurationErrorExitCode)
        }
        ServiceLogging.bootstrap(service: name, level: configuration.logLevel)
        ServiceMetrics.bootstrap()
        let logger = ServiceLogging.logger(service: name, level: configuration.logLevel)
        do {
            let app = try await build(configuration, environment, logger)
            try await app.run()
            logger.info("stopped")
            end(status: 0)
        } catch let error as ConfigurationError {
            logger.critical("configuration error: \(error)")
            FileHandle.standardError.write(Data("\(name): configuration error: \(error)\n".utf8))
            end(status: configurationErrorExitCode)
        } catch {
            logger.critical("failed: \(String(describing: error))")
            end(status: 1)
        }
    }

    /// Ends the process without running `atexit` handlers. A Kafka consumer that the broker did not let leave its
    /// group in time is still closing on librdkafka's threads, and the handlers (among them the cleanup of the
    /// OpenSSL that librdkafka links statically) tear down state those threads use: a service aborted on an
    /// `rdk:broker` thread after SIGTERM in CI. Logs are written unbuffered; other C streams are flushed first.
    private static func end(status: Int32) -> Never {
        fflush(nil)
        _exit(status)
    }
}
