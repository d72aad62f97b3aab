import Foundation

/// Who connected to a namespace, as its authorization hook established; the platform's identity type conforms.
package protocol SocketIOUser: Sendable {
    /// Every socket of the user joins the room ``SocketIONamespace/userRoom(_:)`` of this id.
    var userId: String { get }
}

/// Who a namespace's authorization hook let in, and until when (a token's `exp`): the socket is disconnected
/// then unless its credentials are refreshed first.
package struct SocketIOCredentials: Sendable {
    package var user: any SocketIOUser
    package var expiresAt: Date?
    package init(user: any SocketIOUser, expiresAt: Date? = nil) {
        self.user = user
        self.expiresAt = expiresAt
    }
}
