import Contracts
import Foundation
import Realtime
import RealtimePlatform
import ServiceKit

/// chat.access, on every instance: a rider who lost a room is taken out of it.
package struct ChatAccessConsumer: Sendable {
    let workflow: ChatWorkflow
    let namespace: SocketIONamespace

    /// Takes a ``ChatAccessRevoked`` rider's sockets on this instance out of the room; other events are ignored.
    package func handle(_ event: DecodedEvent) async throws {
        guard let revoked = event.payload(as: ChatAccessRevoked.self) else { return }
        try await revoke(revoked)
    }

    /// A rider who lost a room, on every instance: unless the room is theirs again, their sockets here leave it,
    /// with the room's row locked so that no join of theirs is admitted meanwhile. (The change's commit took them
    /// out already, and told their apps with `access_revoked`, unless this instance missed the store's notices.)
    /// They leave through the room's feed once this instance was told of what committed before, so a message
    /// committed before the change still reaches them.
    func revoke(_ revoked: ChatAccessRevoked) async throws {
        let room = ChatHandlers.room(revoked.orderId)
        try await workflow.withRoomLocked(revoked.orderId) { current in
            guard !ChatRules.mayStay(in: current, userId: revoked.riderId, role: .rider) else { return }
            let riders = namespace.sockets(in: room).filter { $0.identity?.userId == revoked.riderId }
            guard !riders.isEmpty else { return }
            try await namespace.noticesCaughtUp()
            namespace.leave(riders, from: room)
        }
    }
}
