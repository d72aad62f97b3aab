import Foundation

/// Who connected to a namespace, as its authorization hook established; the platform's identity type conforms.
public protocol SocketIOUser: Sendable {
    /// Every socket of the user joins the room ``SocketIONamespace/userRoom(_:)`` of this id.
    var userId: String { get }
}

/// Who a namespace's authorization hook let in, and until when (a token's `exp`): the socket is disconnected
/// then unless its credentials are refreshed first.
public struct SocketIOCredentials: Sendable {
    /// The user the socket acts for (``SocketIOSocket/user``).
    public var user: any SocketIOUser
    /// When the credentials expire (a token's `exp`); nil when they do not.
    public var expiresAt: Date?
    /// Credentials for `user`, valid until `expiresAt` (nil: no expiry).
    public init(user: any SocketIOUser, expiresAt: Date? = nil) {
        self.user = user
        self.expiresAt = expiresAt
    }
}
