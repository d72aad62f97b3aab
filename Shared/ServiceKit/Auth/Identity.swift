import Contracts

/// The signed-in user a request or socket acts for, from a verified token.
package struct Identity: Sendable, Equatable {
    /// The token's `sub`.
    package var userId: String
    package var role: Role
    /// The token's `name`, if it has one (shown to the other party, e.g. in chat).
    package var name: String?

    package init(userId: String, role: Role, name: String? = nil) {
        self.userId = userId
        self.role = role
        self.name = name
    }

    /// Throws 403 FORBIDDEN unless the user acts in one of `roles`.
    package func require(_ roles: Role...) throws(APIError) {
        guard roles.contains(role) else {
            throw APIError.forbidden("this action needs the role \(roles.map(\.rawValue).joined(separator: " or "))")
        }
    }
}
