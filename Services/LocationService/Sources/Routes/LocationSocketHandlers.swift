import Contracts
import Realtime
import RealtimePlatform
import ServiceKit

/// The `/tracking` namespace (through ``TrackingHub``): `track`, `untrack`, `position` and recovered rooms.
package struct LocationSocketHandlers: Sendable {
    let hub: TrackingHub

    /// Registers `track`, `untrack`, `position` and the recovered-rooms check on `namespace`.
    package func register(on namespace: SocketIONamespace) {
        namespace.on("track", JobRequest.self) { socket, request in try await hub.watch(socket, jobId: request.jobId) }
        namespace.checkRecoveredRooms { user, _, rooms in await hub.recoveredRooms(user: user, rooms: rooms) }
        namespace.on("untrack", JobRequest.self) { socket, request in
            socket.leave(TrackingHub.room(request.jobId))
            return Untracked(jobId: request.jobId)
        }
        namespace.on("position", CourierPosition.self) { socket, position in
            guard let identity = socket.identity else { throw APIError.unauthorized("not signed in") }
            return try await hub.receive(position, from: identity)
        }
    }
}

/// `track` and `untrack`: the job to watch.
struct JobRequest: Codable, Sendable { var jobId: String }

/// `untrack`'s answer: the job no longer watched.
struct Untracked: Codable, Sendable { var jobId: String }
