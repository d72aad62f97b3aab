/// A stable, machine-readable code in an error answer (`{"error":{"code":...}}`, CONNECT_ERROR's `data.code`,
/// `token_expired`): clients switch on it, never on the message. An application adds its own with
/// `SocketIOErrorCode("SOME_CODE")`.
public struct SocketIOErrorCode: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The code `rawValue`, e.g. `SocketIOErrorCode("ORDER_CLOSED")` for an application's own code.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }

    /// An event's payload is missing or does not have the handler's shape.
    public static let validationFailed: SocketIOErrorCode = "VALIDATION_FAILED"
    /// No credentials, or credentials that do not verify.
    public static let unauthorized: SocketIOErrorCode = "UNAUTHORIZED"
    /// Credentials that verify but do not allow this (another user's token on refresh).
    public static let forbidden: SocketIOErrorCode = "FORBIDDEN"
    /// More events than the socket's rate limit allows.
    public static let rateLimited: SocketIOErrorCode = "RATE_LIMITED"
    /// The socket's credentials expired (the `token_expired` event).
    public static let tokenExpired: SocketIOErrorCode = "TOKEN_EXPIRED"
    /// The server failed; the cause is logged, not sent.
    public static let internalError: SocketIOErrorCode = "INTERNAL_ERROR"
}
