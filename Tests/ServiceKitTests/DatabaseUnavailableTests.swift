import Contracts
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PostgresNIO
import ServiceKit
import TestSupport
import Testing

/// A request whose database connection fails is answered 503 DATABASE_UNAVAILABLE with Retry-After, not 500: the
/// soak saw 500s while Postgres restarted, which apps do not retry.
@Suite("Database unavailable", .timeLimit(.minutes(1)))
struct DatabaseUnavailableTests {
    static func application(database: Database) -> some ApplicationProtocol {
        let router = Router(context: ServiceRequestContext.self)
        router.add(middleware: ErrorMiddleware())
        // The server ends the connection mid-transaction, as a Postgres restart or crash does.
        router.post("/terminated") { _, _ -> String in
            try await database.transaction { connection in
                try await connection.query("SELECT pg_terminate_backend(pg_backend_pid())", logger: database.logger)
                return "not reached"
            }
        }
        router.get("/fine") { _, _ -> String in
            try await database.transaction { connection in
                try await connection.query("SELECT 1", logger: database.logger)
                return "ok"
            }
        }
        return Application(router: router)
    }

    @Test("a connection the server ends mid-request gets 503 DATABASE_UNAVAILABLE with Retry-After; the next works")
    func terminatedConnection() async throws {
        try await withTestDatabase { database in
            try await Self.application(database: database).test(.router) { client in
                // Several times: the next request may lease the connection the server closed before the pool has
                // seen it close (it then hung, or answered 503, one time in five).
                for _ in 0..<5 {
                    let answer = try await client.execute(uri: "/terminated", method: .post)
                    #expect(answer.status == .serviceUnavailable)
                    #expect(answer.headers[.retryAfter] == "1")
                    let body = try JSONDecoder().decode(APIError.Body.self, from: Data(buffer: answer.body))
                    #expect(body.error.code == .databaseUnavailable)
                    #expect(try await client.execute(uri: "/fine", method: .get).status == .ok)
                }
            }
        }
    }
}
