import Contracts
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PostgresNIO

/// `Idempotency-Key` handling for state-changing requests, inside the caller's transaction
/// (``Database/idempotentTransaction(_:status:_:)``) or in the one statement that makes the change
/// (``storeSQL(parametersFrom:readingFrom:)``).
///
/// The first request with a key runs and its answer is stored with the change it made, atomically; a retry with
/// the same key and the same request (method, path, body) gets the stored answer and changes nothing; the same
/// key with another request is refused with 422 `IDEMPOTENCY_KEY_REUSED`. In a transaction, concurrent retries
/// wait on the key's lock; a statement does not take it, so of two requests storing under one key at once, the
/// second fails (``isKeyTaken(_:)``) and is answered from what the first stored. Answers that are errors are not
/// stored, so a retry runs again.
package struct IdempotentRequest: Sendable {
    package let userId: String
    package let key: String?
    package let fingerprint: String

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Longest key accepted, in bytes.
    package static let maximumKeyLength = 255

    /// Reads the key from `request` (absent: the request is not idempotent) and fingerprints the request.
    /// - Throws: 400 `BAD_REQUEST` for an empty or overlong key.
    package init(request: Request, body: ByteBuffer, userId: String) throws(APIError) {
        self.userId = userId
        if let key = request.headers[HTTPField.Name("Idempotency-Key")!] {
            let trimmed = key.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, trimmed.utf8.count <= Self.maximumKeyLength else {
                throw APIError.badRequest("Idempotency-Key must be 1 to \(Self.maximumKeyLength) bytes")
            }
            self.key = trimmed
        } else {
            self.key = nil
        }
        var hasher = SHA256()
        hasher.update(data: Data("\(request.method.rawValue) \(request.uri.path)\n".utf8))
        hasher.update(data: Data(buffer: body))
        // Hex by hand: `String(format:)` per byte was 3.7% of the order service's CPU during the pickup benchmark.
        var hex: [UInt8] = []
        hex.reserveCapacity(2 * SHA256.byteCount)
        for byte in hasher.finalize() {
            hex.append(Self.hexDigits[Int(byte >> 4)])
            hex.append(Self.hexDigits[Int(byte & 15)])
        }
        self.fingerprint = String(decoding: hex, as: UTF8.self)
    }

    /// A previously stored answer.
    package struct StoredAnswer: Sendable {
        package var status: Int
        package var body: Data

        package init(status: Int, body: Data) {
            self.status = status
            self.body = body
        }
    }

    /// Takes the key on `connection` (in a transaction): nil if it is new (run the request, then ``store``),
    /// or the stored answer of the first request.
    /// - Throws: 422 `IDEMPOTENCY_KEY_REUSED` if the key was used for another request.
    package func replay(on connection: PostgresConnection, logger: Logger) async throws -> StoredAnswer? {
        guard let key else { return nil }
        // Serializes concurrent requests with one key; released at the end of the transaction.
        try await connection.queryWhileOpen(
            "SELECT pg_advisory_xact_lock(hashtext(\(userId + "\u{1F}" + key)))", logger: logger)
        return try await storedAnswer(on: connection, logger: logger)
    }

    /// The stored answer of the first request with this key, nil if there is none yet, without taking the key: for
    /// a change that stores its answer in its own statement (``storeSQL(parametersFrom:readingFrom:)``).
    /// - Throws: 422 `IDEMPOTENCY_KEY_REUSED` if the key was used for another request.
    package func storedAnswer(on connection: PostgresConnection, logger: Logger) async throws -> StoredAnswer? {
        guard let key else { return nil }
        let rows = try await connection.queryWhileOpen(
            """
            SELECT \(unescaped: Self.storedColumns(of: "idempotency_keys")) FROM idempotency_keys
            WHERE user_id = \(userId) AND idempotency_key = \(key)
            """, logger: logger
        )
        for try await row in rows { return try storedAnswer(in: row.makeRandomAccess()) }
        return nil
    }

    /// The columns of a stored answer that ``storedAnswer(in:)`` reads, from `table` (`idempotency_keys` or its
    /// alias), for a statement that reads it with something else.
    package static func storedColumns(of table: String) -> String {
        "\(table).request_fingerprint, \(table).status AS answer_status, \(table).response_body"
    }

    /// The stored answer in `row` (its ``storedColumns(of:)``, null if there is none).
    /// - Throws: 422 `IDEMPOTENCY_KEY_REUSED` if the key was used for another request.
    package func storedAnswer(in row: PostgresRandomAccessRow) throws -> StoredAnswer? {
        guard let storedFingerprint = try row["request_fingerprint"].decode(String?.self) else { return nil }
        guard storedFingerprint == fingerprint else {
            throw APIError(
                .unprocessableContent, code: .idempotencyKeyReused,
                message: "this Idempotency-Key was already used for a different request"
            )
        }
        return StoredAnswer(
            status: try row["answer_status"].decode(Int.self),
            body: Data(buffer: try row["response_body"].decode(ByteBuffer.self)))
    }

    /// Stores the answer of the first request under the key, in the same transaction as its change.
    package func store(status: Int, body: Data, on connection: PostgresConnection, logger: Logger) async throws {
        guard key != nil else { return }
        var bindings = PostgresBindings()
        appendStoreArguments(status: status, body: body, to: &bindings)
        try await connection.queryWhileOpen(StoreAnswer.self, bindings, logger: logger)
    }

    /// An INSERT that stores an answer (for each row of `source`, a CTE of the caller's statement that has a row
    /// when its change was made), with the five values of ``appendStoreArguments(status:body:to:)`` numbered from
    /// `first`: the answer stored in the statement that makes the change. Another request with the key storing
    /// first fails the statement (``isKeyTaken(_:)``).
    package static func storeSQL(parametersFrom first: Int, readingFrom source: String? = nil) -> String {
        """
        INSERT INTO idempotency_keys (user_id, idempotency_key, request_fingerprint, status, response_body)
        SELECT $\(first)::text, $\(first + 1)::text, $\(first + 2)::text, $\(first + 3)::integer, $\(first + 4)::bytea
        """ + (source.map { " FROM \($0)" } ?? "")
    }

    /// Appends the values of ``storeSQL(parametersFrom:readingFrom:)`` that store `body` answered with `status`.
    package func appendStoreArguments(status: Int, body: Data, to bindings: inout PostgresBindings) {
        bindings.append(userId)
        bindings.append(key)
        bindings.append(fingerprint)
        bindings.append(status)
        bindings.append(ByteBuffer(data: body))
    }

    /// Whether `error` failed a statement storing an answer because another request with the key stored its own
    /// first: read that answer (the first request's, or 422 for another request's).
    package static func isKeyTaken(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError else { return false }
        return error.sqlState == "23505" && error.serverInfo?[.constraintName] == "idempotency_keys_pkey"
    }

    /// The HTTP answer for a stored or fresh JSON body.
    package static func response(status: Int, body: Data, replayed: Bool) -> Response {
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8", .contentLength: String(body.count)]
        if replayed { headers[HTTPField.Name("Idempotent-Replayed")!] = "true" }
        return Response(
            status: HTTPResponse.Status(code: status), headers: headers, body: .init(byteBuffer: ByteBuffer(data: body))
        )
    }
}

extension Database {
    /// Runs a state-changing request in a transaction with `Idempotency-Key` semantics and answers `status`
    /// with the JSON of what `body` returns.
    package func idempotentTransaction<Answer: Encodable & Sendable>(
        _ request: IdempotentRequest, status: HTTPResponse.Status = .ok,
        _ body: @Sendable (PostgresConnection) async throws -> Answer
    ) async throws -> Response {
        var keyTaken = false
        while true {
            do {
                let (stored, replayed) = try await transaction { connection in
                    if let previous = try await request.replay(on: connection, logger: logger) {
                        return (previous, true)
                    }
                    let answer = try await body(connection)
                    let encoded = try ContractCoding.encode(answer)
                    try await request.store(status: Int(status.code), body: encoded, on: connection, logger: logger)
                    return (IdempotentRequest.StoredAnswer(status: Int(status.code), body: encoded), false)
                }
                return IdempotentRequest.response(status: stored.status, body: stored.body, replayed: replayed)
            } catch  where !keyTaken && IdempotentRequest.isKeyTaken(error) {
                // A request that stores its answer in its own statement (without the key's lock) stored one first:
                // the transaction, run again, replays it or refuses the key.
                keyTaken = true
            }
        }
    }
}

/// Stores an answer under its key: ``IdempotentRequest/storeSQL(parametersFrom:readingFrom:)`` on its own.
enum StoreAnswer: PreparedStatementText {
    static let sql = IdempotentRequest.storeSQL(parametersFrom: 1)
}
