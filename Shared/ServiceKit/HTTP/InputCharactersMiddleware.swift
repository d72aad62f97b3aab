import Contracts
import Hummingbird

/// Refuses a request whose path or query holds an encoded NUL character (`%00`) with 400 `INVALID_CHARACTER`,
/// before any route reads it: Postgres stores no NUL in text, so such a parameter could only fail later with a 500.
/// (JSON bodies get the same check when they are decoded: ``NULCharacterError``.)
package struct InputCharactersMiddleware<Context: RequestContext>: RouterMiddleware {
    package init() {}

    package func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        if Self.holdsEncodedNUL(request.uri.string) {
            throw APIError.badRequest(
                "the path and query must not contain the NUL character (%00)", code: .invalidCharacter)
        }
        return try await next(request, context)
    }

    /// Whether `target` holds `%00` (the only way a NUL reaches a request target).
    static func holdsEncodedNUL(_ target: String) -> Bool {
        let bytes = Array(target.utf8)
        guard bytes.count >= 3 else { return false }
        for index in 0..<(bytes.count - 2) where bytes[index] == UInt8(ascii: "%") {
            if bytes[index + 1] == UInt8(ascii: "0"), bytes[index + 2] == UInt8(ascii: "0") { return true }
        }
        return false
    }
}
