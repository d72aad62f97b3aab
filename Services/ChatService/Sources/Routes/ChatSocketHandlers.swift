import Contracts
import Foundation
import Logging
import PostgresNIO
import Realtime
import RealtimePlatform
import ServiceKit

#if canImport(Glibc)
    import Glibc
#endif

/// The `/chat` namespace's events (through ``ChatWorkflow``): join, leave, send, recovery and presence.
package struct ChatHandlers: Sendable {
    let workflow: ChatWorkflow
    let settings: ChatSettings
    let instanceId: String
    let logger: Logger

    package static func room(_ orderId: String) -> String { ChatRoom.socketRoom(orderId) }
    static let roomPrefix = ChatRoom.socketRoomPrefix

    /// Registers the events, the recovered-rooms check, the connect handler and presence on `namespace`.
    package func register(on namespace: SocketIONamespace) {
        namespace.on("join", JoinRequest.self) { socket, request in
            try await join(socket, request)
        }
        namespace.on("leave", JoinRequest.self) { socket, request in
            try await leave(socket, request)
        }
        namespace.on("message", SendRequest.self) { socket, request in
            try await send(socket, request)
        }
        namespace.checkRecoveredRooms { user, socketId, rooms in
            await recoveredRooms(user: user, socketId: socketId, rooms: rooms)
        }
        namespace.onConnect { socket in
            if socket.recovered { await recheckRooms(of: socket) }
        }
        namespace.forgetPresenceOnDisconnect(workflow.presence, database: workflow.database, logger: logger)
        namespace.reportAppState(to: workflow.presence, database: workflow.database)
    }

    // MARK: Socket events

    struct JoinRequest: Codable, Sendable { var orderId: String }

    struct JoinReply: Codable, Sendable {
        var ok = true
        var readOnly: Bool
        var rider: PersonRef?
        /// The last 20 messages, oldest first.
        var messages: [ChatMessageView]
    }

    struct SendRequest: Codable, Sendable {
        var orderId: String
        var clientMessageId: String
        var text: String?
        var quickReplyId: String?
    }

    struct SendReply: Codable, Sendable {
        var id: String
        var sentAt: Date
        var status = "sent"
    }

    struct Left: Codable, Sendable { var ok = true }

    func join(_ socket: SocketIOSocket, _ request: JoinRequest) async throws -> JoinReply {
        guard let identity = socket.identity else { throw APIError.unauthorized("not signed in") }
        let orderId = try Validate.identifier(request.orderId, "orderId")
        let room = Self.room(orderId)
        let joined: ChatWorkflow.Joined
        do {
            joined = try await workflow.join(
                orderId: orderId, identity: identity, socketId: socket.id, instanceId: instanceId
            ) {
                try await socket.namespace.noticesCaughtUp()
                socket.join(room)
            }
        } catch {
            // Refused, or not confirmed: a socket in the room from an earlier join does not stay there.
            socket.leave(room)
            throw error
        }
        return JoinReply(readOnly: joined.access == .readOnly, rider: joined.rider, messages: joined.history)
    }

    /// A socket being recovered gets back the chat rooms it may still read (a rider re-assigned away while their
    /// connection was down does not). Checked before the socket is back in its rooms (so it is not sent what it
    /// missed in a room it lost); ``recheckRooms(of:)`` closes the gap after, and records its presence again.
    func recoveredRooms(user: any SocketIOUser, socketId: String, rooms: Set<String>) async -> Set<String> {
        guard let identity = user as? Identity else { return [] }
        var allowed = Set<String>()
        for room in rooms {
            guard room.hasPrefix(Self.roomPrefix) else {
                allowed.insert(room)
                continue
            }
            let orderId = String(room.dropFirst(Self.roomPrefix.count))
            if (try? await workflow.mayStay(orderId: orderId, identity: identity)) == true { allowed.insert(room) }
        }
        return allowed
    }

    /// A recovered socket, now back in its rooms, leaves each chat room its user lost between the check of
    /// ``recoveredRooms(user:socketId:rooms:)`` and its return (a re-assignment whose ``ChatAccessRevoked`` was
    /// handled in between found no socket to remove), and is told with `access_revoked`. A room whose access
    /// cannot be read now is left too: the app joins it again.
    func recheckRooms(of socket: SocketIOSocket) async {
        guard let identity = socket.identity else { return }
        for room in socket.rooms where room.hasPrefix(Self.roomPrefix) {
            let orderId = String(room.dropFirst(Self.roomPrefix.count))
            do {
                // A late notice of an older move away may have taken it out meanwhile: back in, under the lock.
                let kept = try await workflow.rejoin(
                    orderId: orderId, identity: identity, socketId: socket.id, instanceId: instanceId
                ) {
                    try await socket.namespace.noticesCaughtUp()
                    socket.join(room)
                }
                if !kept {
                    socket.leave(room)
                    try await socket.namespace.emit(
                        "access_revoked", AccessRevoked(orderId: orderId), toRoom: socket.id)
                }
            } catch {
                socket.leave(room)
                logger.warning(
                    "could not check a recovered socket's chat room; it left the room",
                    metadata: ["error": "\(error)", "socket.id": "\(socket.id)", "order.id": "\(orderId)"])
            }
        }
    }

    func leave(_ socket: SocketIOSocket, _ request: JoinRequest) async throws -> Left {
        socket.leave(Self.room(request.orderId))
        try await workflow.leave(socketId: socket.id)
        return Left()
    }

    func send(_ socket: SocketIOSocket, _ request: SendRequest) async throws -> SendReply {
        guard let identity = socket.identity else { throw APIError.unauthorized("not signed in") }
        let orderId = try Validate.identifier(request.orderId, "orderId")
        // Only a socket in the room sends: a rider re-assigned away has left it the moment they were told, even
        // while this instance's projection of the order has not caught up yet.
        guard socket.rooms.contains(Self.room(orderId)) else { throw ChatRuleViolation.notJoined }
        let clientMessageId = try ChatRules.clientMessageId(request.clientMessageId)
        let text = try ChatRules.text(
            typed: request.text, quickReplyId: request.quickReplyId, role: identity.role,
            quickReplies: settings.quickReplies)
        // The `message` emit is written with the message, in its transaction: delivered to the room's other sockets
        // on every instance once it commits.
        let (message, _) = try await workflow.send(
            orderId: orderId, identity: identity, clientMessageId: clientMessageId, text: text,
            quickReplyId: request.quickReplyId, fromSocket: socket.id)
        if settings.killAfterSend { kill(getpid(), SIGKILL) }
        return SendReply(id: message.id, sentAt: message.sentAt)
    }
}
