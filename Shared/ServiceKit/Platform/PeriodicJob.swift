import Logging
import ServiceLifecycle

/// Runs `work` every `interval` until graceful shutdown (schedulers, refreshers, supervisors). A failing round is
/// logged with `failure` and the next round runs as usual.
package struct PeriodicJob: Service {
    let interval: Duration
    let failure: String
    let logger: Logger
    let work: @Sendable () async throws -> Void

    package init(
        every interval: Duration, failure: String, logger: Logger, _ work: @escaping @Sendable () async throws -> Void
    ) {
        self.interval = interval
        self.failure = failure
        self.logger = logger
        self.work = work
    }

    package func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                guard (try? await Task.sleep(for: interval)) != nil else { return }
                do {
                    try await work()
                } catch {
                    logger.warning("\(failure)", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}

extension ServicePlatform {
    /// Adds a ``PeriodicJob`` to the platform's services.
    package mutating func addPeriodicJob(
        every interval: Duration, failure: String, _ work: @escaping @Sendable () async throws -> Void
    ) {
        addService(PeriodicJob(every: interval, failure: failure, logger: logger, work))
    }
}
