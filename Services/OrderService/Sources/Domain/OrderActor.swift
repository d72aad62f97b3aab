import Contracts

/// Who asks for a transition.
package struct OrderActor: Sendable, Equatable {
    package var id: String
    package var role: Role
    package init(id: String, role: Role) {
        self.id = id
        self.role = role
    }
}
