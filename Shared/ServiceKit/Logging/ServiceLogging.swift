import Logging
import Synchronization

/// Process-wide logging set-up: JSON lines for every logger. Safe to call more than once (tests build several
/// services in one process); the first call wins.
package enum ServiceLogging {
    private static let bootstrapped = Mutex(false)

    package static func bootstrap(service: String, level: Logger.Level) {
        bootstrapped.withLock { done in
            guard !done else { return }
            done = true
            LoggingSystem.bootstrap { label in JSONLogHandler(label: label, service: service, level: level) }
        }
    }

    /// The service's root logger.
    package static func logger(service: String, level: Logger.Level) -> Logger {
        var logger = Logger(label: service)
        logger.logLevel = level
        return logger
    }
}
