import Realtime
import RealtimePlatform
import ServiceKit

/// The `/orders` namespace: each socket is in the one room its identity gives (``OrderUpdates/room(of:)``).
package struct OrderSocketHandlers: Sendable {
    /// Registers the connect handler and the recovered-rooms check on `namespace`.
    package func register(on namespace: SocketIONamespace) {
        namespace.onConnect { socket in
            guard let identity = socket.identity, let room = OrderUpdates.room(of: identity) else { return }
            socket.join(room)
        }
        // A recovered socket keeps only the room its current token gives (an admin demoted meanwhile loses theirs).
        namespace.checkRecoveredRooms { user, _, rooms in
            guard let identity = user as? Identity, let room = OrderUpdates.room(of: identity) else { return [] }
            return rooms.intersection([room])
        }
    }
}
