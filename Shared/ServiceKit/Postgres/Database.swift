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

    /// A client for `settings`, with `search_path` set to the service's schema and `application_name` to the
    /// service's name. Run it (it is a `Service`).
    ///
    /// The pool runs no keep-alive query. PostgresNIO would set a keep-alive timer on every connection it gets back
    /// (a task group, two tasks and a `Task.sleep` on libdispatch) and cancel it at the next lease, so every query
    /// paid for it. Postgres keeps idle connections alive instead (`tcp_keepalives_*`): it probes one after 60 s of
    /// silence, so that no NAT or firewall between forgets it, and drops a client that stops answering. The pool's
    /// minimum stays 0: with a minimum, postgres-nio 1.33.2 fails a precondition (`createNewDemandConnectionIfPossible`)
    /// when Postgres comes back after an outage under load (`ConnectionPoolTests`).
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
        configuration.options.keepAliveBehavior = nil
        configuration.options.connectTimeout = .seconds(5)
        configuration.options.additionalStartupParameters = [
            ("search_path", "\(settings.schema),public"), ("application_name", settings.applicationName),
            ("tcp_keepalives_idle", "60"), ("tcp_keepalives_interval", "10"), ("tcp_keepalives_count", "3"),
        ]
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
                try await client.execute("SELECT 1", logger: logger)
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

    /// Leases a connection for `read`, a statement that changes nothing, then `body` with what it read, without a
    /// transaction. A pooled connection the server closed fails `read` with nothing done, and both run again on
    /// another (as a transaction's BEGIN does, ``PostgresClient/transaction(logger:_:)``).
    package func withConnection<Read: Sendable, Result: Sendable>(
        reading read: (PostgresConnection) async throws -> Read,
        then body: (PostgresConnection, Read) async throws -> Result
    ) async throws -> Result {
        try await client.withConnection(logger: logger, first: read, then: body)
    }

    /// Runs `statement` on a leased connection without a transaction, its rows (if any) discarded.
    package func execute(_ statement: PostgresQuery) async throws {
        try await client.execute(statement, logger: logger)
    }
}

extension PostgresClient {
    /// Runs `statement` on a leased connection without a transaction, its rows (if any) discarded; like every
    /// statement here, it gives up when the connection closes under it (``PostgresConnection/queryWhileOpen``).
    package func execute(_ statement: PostgresQuery, logger: Logger) async throws {
        try await withConnection { connection in _ = try await connection.queryWhileOpen(statement, logger: logger) }
    }

    /// Runs `body` in a transaction on a leased connection: committed if it returns, rolled back if it throws; the
    /// error is rethrown as is. Unlike `withTransaction`, it never waits forever for a ROLLBACK on a connection that
    /// closed under `body` (Postgres rolls such a transaction back itself). A pooled connection the server closed
    /// (a restart, a terminated backend) may be leased once more before the pool notices: BEGIN fails on it with
    /// nothing run, and the transaction starts again (on another, once the pool has seen it close), three times at most.
    package func transaction<Result: Sendable>(
        logger: Logger, _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await withConnection(logger: logger) { connection in
            _ = try await connection.queryWhileOpen("BEGIN", logger: logger)
        } then: { connection, _ in
            let result: Result
            do {
                result = try await body(connection)
            } catch {
                await connection.cleanUp("ROLLBACK", logger: logger)
                throw error
            }
            try await connection.queryWhileOpen("COMMIT", logger: logger)
            return result
        }
    }

    /// Leases a connection for `first`, a statement that changes nothing (BEGIN, a read), then `rest` with its
    /// answer. A pooled connection the server closed (a restart, a terminated backend) may be leased once more
    /// before the pool notices: `first` fails on it with nothing done, and both run again (on another, once the pool
    /// has seen it close), three times at most.
    package func withConnection<First: Sendable, Result: Sendable>(
        logger: Logger, first: (PostgresConnection) async throws -> First,
        then rest: (PostgresConnection, First) async throws -> Result
    ) async throws -> Result {
        var attempt = 1
        while true {
            do {
                return try await withConnection { connection in
                    let answer: First
                    do {
                        answer = try await first(connection)
                    } catch  where Database.isUnavailable(error) {
                        throw ClosedBeforeFirst(error: error)
                    }
                    return try await rest(connection, answer)
                }
            } catch let stale as ClosedBeforeFirst {
                guard attempt < 3 else { throw stale.error }
                logger.notice(
                    "a pooled connection was closed; starting again on another", metadata: ["attempt": "\(attempt)"])
                // The pool drops the closed connection once it has seen it close, a moment later.
                try await Task.sleep(for: .milliseconds(25 * attempt))
                attempt += 1
            }
        }
    }
}

/// The first statement on a leased connection failed because the connection was closed: nothing ran.
private struct ClosedBeforeFirst: Error {
    let error: any Error
}

/// A leased connection closed before it answered; like a `PSQLError` connection failure, the database went away.
package struct DatabaseConnectionClosed: Error, CustomStringConvertible {
    package var description: String { "the database connection closed before it answered" }
}

extension PostgresConnection {
    /// Runs `query` like `query(_:logger:)`, but throws ``DatabaseConnectionClosed`` if the connection is or becomes
    /// closed before the answer. postgres-nio 1.33 writes a query to its channel without a write promise, so a query
    /// written just as the connection closes is dropped and never answered (seen here as requests hanging for good
    /// after Postgres crashed or a backend was terminated); every statement in the services goes through here, so the
    /// answer is raced against the close. An answer that arrives within ``ConnectionCloseWatchers/grace`` of the close
    /// still counts; a query left waiting is left behind in a task of its own.
    @discardableResult
    package func queryWhileOpen(
        _ query: PostgresQuery, logger: Logger, file: String = #fileID, line: Int = #line
    ) async throws -> PostgresRowSequence {
        try await answerWhileOpen { try await $0.query(query, logger: logger, file: file, line: line) }
    }

    /// Runs `ask` on this connection, raced against the connection's close (see
    /// ``queryWhileOpen(_:logger:file:line:)``).
    func answerWhileOpen<Answer: Sendable>(
        _ ask: @escaping @Sendable (PostgresConnection) async throws -> Answer
    ) async throws -> Answer {
        guard !isClosed else { throw DatabaseConnectionClosed() }
        let answered = eventLoop.makePromise(of: Answer?.self)
        let watch = ConnectionCloseWatchers.shared.watch(self) { answered.succeed(nil) }
        defer { ConnectionCloseWatchers.shared.unwatch(self, watch) }
        Task {
            do {
                answered.succeed(try await ask(self))
            } catch {
                answered.fail(error)
            }
        }
        guard let answer = try await answered.futureResult.get() else { throw DatabaseConnectionClosed() }
        return answer
    }

    /// Runs a clean-up statement (ROLLBACK, an unlock), giving up when the connection closes (see
    /// ``queryWhileOpen(_:logger:file:line:)``): the session it belonged to is gone, and its locks with it.
    package func cleanUp(_ statement: PostgresQuery, logger: Logger) async {
        _ = try? await queryWhileOpen(statement, logger: logger)
    }
}

extension Database {
    /// Whether `error` says the database went away (unreachable, restarting, a connection closed under a request)
    /// rather than anything about the request: worth trying again shortly.
    package static func isUnavailable(_ error: any Error) -> Bool {
        (error as? PSQLError)?.isConnectionFailure == true || error is DatabaseConnectionClosed
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
