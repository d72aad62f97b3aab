import Contracts
import HTTPTypes
import Hummingbird
import Logging
import PostgresNIO

/// Turns every error a route throws into the one JSON error shape. Unexpected errors become 500
/// `INTERNAL_ERROR`, logged with the request id, their text never sent to the client.
package struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    package init() {}

    package func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return try error.response(from: request, context: context)
        } catch let error as any APIErrorConvertible {
            return try error.apiError.response(from: request, context: context)
        } catch let error as HTTPError {
            return try Self.apiError(status: error.status, message: error.body, headers: error.headers)
                .response(from: request, context: context)
        } catch let error as any HTTPResponseError {
            return try Self.apiError(status: error.status, message: nil, headers: [:])
                .response(from: request, context: context)
        } catch let error where Database.isUnavailable(error) {
            // Postgres restarting or out of reach: the client should try again (with the same Idempotency-Key, a
            // request whose commit went through before the connection was lost gets its first answer).
            context.logger.warning(
                "database unavailable",
                metadata: ["error": "\(String(reflecting: error))", "http.path": "\(request.uri.path)"]
            )
            return try APIError(
                .serviceUnavailable, code: .databaseUnavailable,
                message: "the database is not reachable right now; try again shortly", headers: [.retryAfter: "1"]
            ).response(from: request, context: context)
        } catch {
            context.logger.error(
                "request failed",
                metadata: ["error": "\(String(reflecting: error))", "http.path": "\(request.uri.path)"]
            )
            return try APIError(
                .internalServerError, code: .internalError, message: "internal error (request \(context.id))"
            ).response(from: request, context: context)
        }
    }

    /// Maps a framework error status to the code apps expect for it.
    static func apiError(status: HTTPResponse.Status, message: String?, headers: HTTPFields) -> APIError {
        let code: ErrorCode =
            switch status.code {
            case 400: .badRequest
            case 401: .unauthorized
            case 403: .forbidden
            case 404: .notFound
            case 405: .methodNotAllowed
            case 413: .payloadTooLarge
            case 415: .unsupportedMediaType
            case 429: .rateLimited
            case 503: .notReady
            case 400..<500: .badRequest
            default: .internalError
            }
        let defaultMessage =
            status.code == 404
            ? "no such resource" : status.code == 413 ? "the request body is too large" : status.reasonPhrase
        return APIError(status, code: code, message: message ?? defaultMessage, headers: headers)
    }
}
