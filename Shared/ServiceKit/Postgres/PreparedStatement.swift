import Logging
import PostgresNIO

/// The text of a statement run on every request or emit: Postgres parses and plans it once per connection, then
/// only binds and runs it (``PostgresConnection/queryWhileOpen(_:_:logger:file:line:)``). Its values are `$1`,
/// `$2`, … with their types cast in the text (a value bound first as NULL must not decide a type), so the text is
/// the same on every run.
///
/// Parsing and planning was a third of Postgres's CPU in the chat benchmark, where each message's statements are
/// cheap to run (perf over `INSTANCES=2 Benchmarks/chat.sh 1000 500 20`, docs/benchmarks.md).
package protocol PreparedStatementText: SendableMetatype {
    static var sql: String { get }
}

/// One run of `Text` with its values, as postgres-nio runs prepared statements.
struct PreparedRun<Text: PreparedStatementText>: PostgresPreparedStatement {
    /// Unique in the process, as the type's metadata is, and cheap: it is read on every run (the type's name was
    /// 3% of the chat service's CPU in the recovery benchmark).
    static var name: String { "s" + String(UInt(bitPattern: ObjectIdentifier(Text.self)), radix: 16) }
    static var sql: String { Text.sql }

    let bindings: PostgresBindings

    func makeBindings() -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}

extension PostgresConnection {
    /// Runs statement `text` with `bindings` (its `$1`, `$2`, …), prepared on this connection the first time;
    /// like every statement here, it gives up when the connection closes under it.
    ///
    /// postgres-nio 1.33 keeps a failed preparation for the connection's life, answering every later run of the
    /// statement with that error; a preparation fails on a table that does not exist yet, in a transaction already
    /// aborted, or when a table changed under a prepared statement. On such an error the connection is closed, so
    /// the pool opens a fresh one that prepares the statement again.
    @discardableResult
    package func queryWhileOpen<Text: PreparedStatementText>(
        _ text: Text.Type, _ bindings: PostgresBindings, logger: Logger, file: String = #fileID, line: Int = #line
    ) async throws -> [PostgresRow] {
        do {
            return try await answerWhileOpen { connection in
                var rows: [PostgresRow] = []
                for try await row in try await connection.execute(
                    PreparedRun<Text>(bindings: bindings), logger: logger, file: file, line: line)
                {
                    rows.append(row)
                }
                return rows
            }
        } catch let failure as PSQLError where failure.mayHaveSpoiledPreparation {
            logger.warning(
                "a prepared statement failed as a whole; closing its connection",
                metadata: ["db.sqlstate": "\(failure.sqlState ?? "")"])
            try? await close()
            throw failure
        }
    }
}

extension PSQLError {
    /// Errors of the statement rather than of its values: syntax or a missing or changed table (SQLSTATE 42, and
    /// 0A000 for a prepared statement whose result changed), or a transaction already aborted (25P02).
    var mayHaveSpoiledPreparation: Bool {
        guard let sqlState else { return false }
        return sqlState.hasPrefix("42") || sqlState == "0A000" || sqlState == "25P02"
    }
}

extension Database {
    /// Runs statement `text` with `bindings` on a leased connection without a transaction, its rows discarded.
    package func execute<Text: PreparedStatementText>(_ text: Text.Type, _ bindings: PostgresBindings) async throws {
        _ = try await withConnection { try await $0.queryWhileOpen(text, bindings, logger: logger) }
    }
}

extension PostgresBindings {
    /// Binds `values` in order, the first as `$1`; nil binds NULL.
    package init(_ values: (any PostgresDynamicTypeEncodable)?...) {
        self.init(capacity: values.count)
        for value in values {
            if let value { append(value) } else { appendNull() }
        }
    }
}

/// The text of a call of the SQL function `name` whose arguments are parameters numbered from `first`, each cast to
/// its type: `name($4::uuid[], $5::text)`. For a statement that places a shared write (an emit, the outbox's) after
/// parameters of its own.
package func sqlCall(_ name: String, parameterTypes types: [String], from first: Int) -> String {
    name + "(" + types.enumerated().map { "$\(first + $0.offset)::\($0.element)" }.joined(separator: ", ") + ")"
}
