import HTTPTypes
import Hummingbird

/// Requires a valid bearer token on every request it guards: 401 with the JSON error body otherwise.
package struct AuthenticationMiddleware: RouterMiddleware {
    package typealias Context = ServiceRequestContext
    let verifier: AccessTokenVerifier

    package init(verifier: AccessTokenVerifier) { self.verifier = verifier }

    package func handle(
        _ request: Request, context: ServiceRequestContext,
        next: (Request, ServiceRequestContext) async throws -> Response
    ) async throws -> Response {
        guard let token = Self.bearerToken(in: request.headers) else {
            throw APIError.unauthorized("missing bearer token (Authorization: Bearer <JWT>)")
        }
        var context = context
        do {
            context.identity = try await verifier.verify(token)
        } catch {
            var error = error
            error.headers[.wwwAuthenticate] = #"Bearer error="invalid_token""#
            throw error
        }
        context.logger[metadataKey: "user.id"] = "\(context.identity!.userId)"
        return try await next(request, context)
    }

    static func bearerToken(in headers: HTTPFields) -> String? {
        guard let value = headers[.authorization] else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }
}
