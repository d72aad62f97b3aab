import Contracts
import Foundation
import Realtime
import ServiceKit

extension Identity: SocketIOUser {}

extension SocketIOSocket {
    /// The signed-in user of this socket (set by ``SocketIONamespace/requireToken(_:roles:)``).
    package var identity: Identity? { user as? Identity }
}

extension SocketIONamespace {
    /// Requires a valid access token in the handshake (`auth: {token}`), optionally of one of `roles`. The socket
    /// is disconnected at the token's `exp` (after a `token_expired` event) unless the client sends
    /// `refresh_token` `{token}` first: a new token of the same user, verified the same way, acknowledged with
    /// `{expiresAt}` or an error.
    package func requireToken(_ verifier: AccessTokenVerifier, roles: Set<Role>? = nil) {
        requireCredentials { handshake in
            guard let token = handshake.bearerToken else {
                throw SocketIOConnectRefusal(
                    "missing token: connect with auth {\"token\": \"<JWT>\"}", code: .unauthorized)
            }
            let verified: (identity: Identity, expiresAt: Date)
            do {
                verified = try await verifier.verifyWithExpiry(token)
            } catch let error as APIError {
                throw SocketIOConnectRefusal(error.message, code: SocketIOErrorCode(error.code))
            }
            if let roles, !roles.contains(verified.identity.role) {
                throw SocketIOConnectRefusal(
                    "this namespace is for \(roles.map(\.rawValue).sorted().joined(separator: " and "))",
                    code: .forbidden
                )
            }
            return SocketIOCredentials(user: verified.identity, expiresAt: verified.expiresAt)
        }
    }
}
