import Contracts
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PostgresNIO

/// `Idempotency-Key` handling for state-changing requests, inside the caller's transaction.
///
/// The first request with a key runs and its answer is stored with the change it made, atomically; a retry with
/// the same key and the same request (method, path, body) gets the stored answer and changes nothing; the same
/// key with another request is refused with 422 `IDEMPOTENCY_KEY_REUSED`. Concurrent retries wait on the key's
/// row lock. Answers that are errors are not stored (the transaction rolls back), so a retry runs again.
package struct IdempotentRequest: Sendable {
    package let userId: String
    package let key: String?
    package let fingerprint: String

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
        self.fingerprint = hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    /// A previously stored answer.
    package struct StoredAnswer: Sendable {
        package var status: Int
        package var body: Data
    }

    /// Takes the key on `connection` (in a transaction): nil if it is new (run the request, then ``store``),
    /// or the stored answer of the first request.
    /// - Throws: 422 `IDEMPOTENCY_KEY_REUSED` if the key was used for another request.
    package func replay(on connection: PostgresConnection, logger: Logger) async throws -> StoredAnswer? {
        guard let key else { return nil }
        // Serializes concurrent requests with one key; released at the end of the transaction.
        try await connection.queryWhileOpen(
            "SELECT pg_advisory_xact_lock(hashtext(\(userId + "\u{1F}" + key)))", logger: logger)
        let rows = try await connection.queryWhileOpen(
            """
            SELECT request_fingerprint, status, response_body FROM idempotency_keys
            WHERE user_id = \(userId) AND idempotency_key = \(key)
            """, logger: logger
        )
        for try await (storedFingerprint, status, body) in rows.decode((String, Int, ByteBuffer).self) {
            guard storedFingerprint == fingerprint else {
                throw APIError(
                    .unprocessableContent, code: .idempotencyKeyReused,
                    message: "this Idempotency-Key was already used for a different request"
                )
            }
            return StoredAnswer(status: status, body: Data(buffer: body))
        }
        return nil
    }

    /// Stores the answer of the first request under the key, in the same transaction as its change.
    package func store(status: Int, body: Data, on connection: PostgresConnection, logger: Logger) async throws {
        guard let key else { return }
        try await connection.queryWhileOpen(
            """
            INSERT INTO idempotency_keys (user_id, idempotency_key, request_fingerprint, status, response_body)
            VALUES (\(userId), \(key), \(fingerprint), \(status), \(ByteBuffer(data: body)))
            """, logger: logger
        )
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
        let (stored, replayed) = try await transaction { connection -> (IdempotentRequest.StoredAnswer, Bool) in
            if let previous = try await request.replay(on: connection, logger: logger) { return (previous, true) }
            let answer = try await body(connection)
            let encoded = try ContractCoding.encode(answer)
            try await request.store(status: Int(status.code), body: encoded, on: connection, logger: logger)
            return (IdempotentRequest.StoredAnswer(status: Int(status.code), body: encoded), false)
        }
        return IdempotentRequest.response(status: stored.status, body: stored.body, replayed: replayed)
    }
}
