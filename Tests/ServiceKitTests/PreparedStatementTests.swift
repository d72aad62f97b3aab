import PostgresNIO
import ServiceKit
import TestSupport
import Testing

@Suite("Prepared statements on a real Postgres", .timeLimit(.minutes(2)))
struct PreparedStatementTests {
    /// A statement on a table each test creates only after the first run failed.
    enum ReadLater: PreparedStatementText {
        static let sql = "SELECT id FROM later WHERE id > $1::integer ORDER BY id"
    }

    @Test("a statement whose preparation failed runs once its table exists: the connection keeping the failure closes")
    func failedPreparationIsNotKept() async throws {
        try await withTestDatabase { database in
            var bindings = PostgresBindings()
            bindings.append(0)
            try await database.withConnection { connection in
                await #expect {
                    try await connection.queryWhileOpen(ReadLater.self, bindings, logger: database.logger)
                } throws: { error in
                    (error as? PSQLError)?.sqlState == "42P01"
                }
                #expect(connection.isClosed)
            }
            try await database.execute("CREATE TABLE later (id integer)")
            try await database.execute("INSERT INTO later VALUES (1), (2)")
            // More runs than the pool has connections, so every connection it holds runs it.
            for _ in 0..<30 {
                let rows = try await database.withConnection {
                    try await $0.queryWhileOpen(ReadLater.self, bindings, logger: database.logger)
                }
                #expect(try rows.map { try $0.decode(Int.self) } == [1, 2])
            }
        }
    }
}
