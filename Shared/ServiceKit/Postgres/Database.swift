import Foundation
import Logging
import NIOPosix
import NIOSSL
import PostgresNIO

/// A service's Postgres: the pooled client, the schema it owns, and the transaction helper.
package struct Database: Sendable {
    package let client: PostgresClient
    /// The schema the service owns; connections have it as their `search_path`, so SQL names tables unqualified.
    package let schema: String
    package let logger: Logger

    package init(client: PostgresClient, schema: String, logger: Logger) {
        self.client = client
        self.schema = schema
        self.logger = logger
    }

    /// A client for `settings`, with `search_path` set to the service's schema. Run it (it is a `Service`).
    package static func makeClient(_ settings: ServiceConfiguration.DatabaseSettings, logger: Logger) -> PostgresClient
    {
        let tls: PostgresClient.Configuration.TLS =
            switch settings.tls {
            case .disable: .disable
            case .prefer: .prefer(.makeClientConfiguration())
            case .require: .require(.makeClientConfiguration())
            }
        var configuration = PostgresClient.Configuration(
            host: settings.host, port: settings.port, username: settings.username, password: settings.password,
            database: settings.database, tls: tls
        )
        configuration.options.maximumConnections = settings.maximumConnections
        configuration.options.connectTimeout = .seconds(5)
        configuration.options.additionalStartupParameters = [("search_path", "\(settings.schema),public")]
        return PostgresClient(configuration: configuration, backgroundLogger: logger)
    }

    /// Runs `body` in a transaction: committed if it returns, rolled back if it throws (the error `body` threw is
    /// rethrown as is). Serialization failures and deadlocks (SQLSTATE 40001, 40P01) are retried up to three
    /// times with a fresh transaction.
    package func transaction<Result: Sendable>(
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await client.transaction(logger: logger, body)
            } catch let failure as PSQLError where attempt < 3 && failure.isRetriable {
                logger.debug("retrying a transaction", metadata: ["db.sqlstate": "\(failure.sqlState ?? "")"])
            }
        }
    }

    /// Waits until `client` (already running) answers a query, retrying every second.
    /// - Throws: ``DependencyUnavailable`` after `timeout`.
    package static func waitForServer(
        _ client: PostgresClient, description: String, timeout: Duration, logger: Logger
    ) async throws {
        // Let the client's run loop start before the first lease.
        try await Task.sleep(for: .milliseconds(20))
        let deadline = ContinuousClock.now + timeout
        while true {
            do {
                try await client.query("SELECT 1", logger: logger)
                return
            } catch {
                guard ContinuousClock.now < deadline else {
                    throw DependencyUnavailable(what: description, reason: "\(String(reflecting: error))")
                }
                logger.warning("waiting for Postgres", metadata: ["error": "\(error)"])
                try await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Leases a connection for `body` without a transaction.
    package func withConnection<Result: Sendable>(_ body: (PostgresConnection) async throws -> Result) async throws
        -> Result
    {
        try await client.withConnection { connection in try await body(connection) }
    }
}

extension PostgresClient {
    /// Runs `body` in a transaction on a leased connection: committed if it returns, rolled back if it throws; the
    /// error is rethrown as is. Unlike `withTransaction`, it never waits forever for a ROLLBACK on a connection that
    /// closed under `body` (Postgres rolls such a transaction back itself).
    package func transaction<Result: Sendable>(
        logger: Logger, _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await withConnection { connection in
            try await connection.query("BEGIN", logger: logger)
            let result: Result
            do {
                result = try await body(connection)
            } catch {
                await connection.cleanUp("ROLLBACK", logger: logger)
                throw error
            }
            try await connection.query("COMMIT", logger: logger)
            return result
        }
    }
}

extension PostgresConnection {
    /// Runs a clean-up statement (ROLLBACK, an unlock), giving up when the connection closes: postgres-nio 1.33
    /// never answers a query written to a connection that has just closed, so the caller would wait forever. Such a
    /// stuck query is left behind in a task of its own; the session it belonged to is gone, and its locks with it.
    package func cleanUp(_ statement: PostgresQuery, logger: Logger) async {
        guard !isClosed else { return }
        let done = eventLoop.makePromise(of: Void.self)
        closeFuture.whenComplete { _ in done.succeed() }
        Task {
            _ = try? await self.query(statement, logger: logger)
            done.succeed()
        }
        try? await done.futureResult.get()
    }
}

extension PSQLError {
    /// The server's SQLSTATE, e.g. `23505` for a unique violation.
    package var sqlState: String? { serverInfo?[.sqlState] }

    /// Serialization failure or deadlock: the same transaction may succeed when run again.
    var isRetriable: Bool { sqlState == "40001" || sqlState == "40P01" }

    /// The database could not be reached or went away mid-request (a connection refused, reset or closed, the server
    /// shutting down or starting up, out of connections), not a problem with the request itself.
    package var isConnectionFailure: Bool {
        switch code {
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed:
            return true
        case .server:
            // 08: connection exception; 53: insufficient resources; 57P: shutdown, crash, cannot connect now.
            guard let sqlState else { return false }
            return sqlState.hasPrefix("08") || sqlState.hasPrefix("53") || sqlState.hasPrefix("57P")
        default:
            return false
        }
    }
}
