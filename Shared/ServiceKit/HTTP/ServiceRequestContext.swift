import Contracts
import Foundation
import Hummingbird
import Logging
import NIOCore

/// The request context of every service: Hummingbird's core context plus the verified caller and the peer.
package struct ServiceRequestContext: RequestContext, RemoteAddressRequestContext {
    package var coreContext: CoreRequestContextStorage
    /// Set by ``AuthenticationMiddleware`` once the bearer token is verified.
    package var identity: Identity?
    /// The address of the connection's peer (the gateway's, behind it).
    package var remoteAddress: SocketAddress?

    package init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.identity = nil
        self.remoteAddress = source.channel.remoteAddress
    }

    package var requestDecoder: ContractRequestDecoder { ContractRequestDecoder() }
    package var responseEncoder: ContractResponseEncoder { ContractResponseEncoder() }

    /// The verified caller; throws 401 if the route was reached without authentication.
    package func requireIdentity() throws(APIError) -> Identity {
        guard let identity else { throw APIError.unauthorized("missing bearer token") }
        return identity
    }

    /// The caller, who must act in one of `roles` (403 otherwise).
    package func requireIdentity(_ roles: Role...) throws(APIError) -> Identity {
        let identity = try requireIdentity()
        guard roles.contains(identity.role) else {
            throw APIError.forbidden("this action needs the role \(roles.map(\.rawValue).joined(separator: " or "))")
        }
        return identity
    }
}

/// Decodes JSON request bodies with the contracts' coding and answers bad bodies with 400 and a message that
/// names the offending field.
package struct ContractRequestDecoder: RequestDecoder {
    package init() {}

    package func decode<T: Decodable>(_ type: T.Type, from request: Request, context: some RequestContext)
        async throws -> T
    {
        if let contentType = request.headers[.contentType], !contentType.lowercased().contains("json") {
            throw APIError(
                .unsupportedMediaType, code: .unsupportedMediaType,
                message: "expected Content-Type application/json, got \(contentType)"
            )
        }
        let buffer = try await request.body.collect(upTo: context.maxUploadSize)
        guard buffer.readableBytes > 0 else {
            throw APIError.badRequest("the request body is empty; expected a JSON object", code: .invalidJSON)
        }
        return try Self.decode(type, from: Data(buffer: buffer))
    }

    /// Decodes `data`, turning a decoding failure into a 400 ``APIError``.
    package static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws(APIError) -> T {
        do {
            return try ContractCoding.decode(type, from: data)
        } catch {
            throw APIError(decodingFailure: error)
        }
    }
}

/// Encodes response bodies with the contracts' coding.
package struct ContractResponseEncoder: ResponseEncoder {
    package init() {}

    package func encode(_ value: some Encodable, from request: Request, context: some RequestContext) throws -> Response
    {
        let data = try ContractCoding.encode(value)
        return Response(
            status: .ok,
            headers: [.contentType: "application/json; charset=utf-8", .contentLength: String(data.count)],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension APIError {
    /// The 400 for anything decoding a request body or a socket payload threw (see ``DecodingProblem``).
    package init(decodingFailure error: any Error) {
        if let error = error as? APIError {
            self = error
        } else {
            let problem = DecodingProblem(error)
            self = .badRequest(problem.message, code: problem.code)
        }
    }
}

extension Request {
    /// The body as collected bytes (empty if none), at most `limit` bytes (413 beyond).
    package func collectBody(upTo limit: Int) async throws -> ByteBuffer {
        try await body.collect(upTo: limit)
    }

    /// Collects the body and decodes it as JSON `T`; also returns the bytes (e.g. for an idempotency fingerprint).
    /// - Throws: 415 for a non-JSON content type, 400 `INVALID_JSON` / `VALIDATION_FAILED`, 413 over the limit.
    package func decodeJSON<T: Decodable>(_ type: T.Type, context: some RequestContext) async throws -> (T, ByteBuffer)
    {
        if let contentType = headers[.contentType], !contentType.lowercased().contains("json") {
            throw APIError(
                .unsupportedMediaType, code: .unsupportedMediaType,
                message: "expected Content-Type application/json, got \(contentType)"
            )
        }
        let buffer = try await collectBody(upTo: context.maxUploadSize)
        guard buffer.readableBytes > 0 else {
            throw APIError.badRequest("the request body is empty; expected a JSON object", code: .invalidJSON)
        }
        return (try ContractRequestDecoder.decode(type, from: Data(buffer: buffer)), buffer)
    }
}
