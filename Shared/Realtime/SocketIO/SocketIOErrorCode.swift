/// A stable, machine-readable code in an error answer (`{"error":{"code":...}}`, CONNECT_ERROR's `data.code`,
/// `token_expired`): clients switch on it, never on the message. An application adds its own with
/// `SocketIOErrorCode("SOME_CODE")`.
package struct SocketIOErrorCode: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    package var rawValue: String
    package init(rawValue: String) { self.rawValue = rawValue }
    package init(_ rawValue: String) { self.rawValue = rawValue }
    package init(stringLiteral value: String) { self.rawValue = value }
    package var description: String { rawValue }

    /// An event's payload is missing or does not have the handler's shape.
    package static let validationFailed: SocketIOErrorCode = "VALIDATION_FAILED"
    /// No credentials, or credentials that do not verify.
    package static let unauthorized: SocketIOErrorCode = "UNAUTHORIZED"
    /// Credentials that verify but do not allow this (another user's token on refresh).
    package static let forbidden: SocketIOErrorCode = "FORBIDDEN"
    /// More events than the socket's rate limit allows.
    package static let rateLimited: SocketIOErrorCode = "RATE_LIMITED"
    /// The socket's credentials expired (the `token_expired` event).
    package static let tokenExpired: SocketIOErrorCode = "TOKEN_EXPIRED"
    /// The server failed; the cause is logged, not sent.
    package static let internalError: SocketIOErrorCode = "INTERNAL_ERROR"
}
