import Contracts
import Foundation
import Logging
import PostgresNIO
import Realtime
import RealtimePlatform
import ServiceKit

/// The `/chat` namespace's events (through ``ChatWorkflow``) and the fan-out of other instances' messages.
package struct ChatHandlers: Sendable {
    let workflow: ChatWorkflow
    let namespace: SocketIONamespace
    let settings: ChatSettings
    let instanceId: String
    let logger: Logger

    package static func room(_ orderId: String) -> String { roomPrefix + orderId }
    static let roomPrefix = "order:"

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
            ) { socket.join(room) }
        } catch {
            // Refused, or not confirmed: a socket in the room from an earlier join does not stay there.
            socket.leave(room)
            throw error
        }
        return JoinReply(readOnly: joined.access == .readOnly, rider: joined.rider, messages: joined.history)
    }

    /// A socket being recovered gets back the chat rooms it may still read (a rider re-assigned away while their
    /// connection was down does not), and is present in them again. Checked before the socket is back in its rooms
    /// (so it is not sent what it missed in a room it lost); ``recheckRooms(of:)`` closes the gap after.
    func recoveredRooms(user: any SocketIOUser, socketId: String, rooms: Set<String>) async -> Set<String> {
        guard let identity = user as? Identity else { return [] }
        var allowed = Set<String>()
        for room in rooms {
            guard room.hasPrefix(Self.roomPrefix) else {
                allowed.insert(room)
                continue
            }
            let orderId = String(room.dropFirst(Self.roomPrefix.count))
            if (try? await workflow.join(
                orderId: orderId, identity: identity, socketId: socketId, instanceId: instanceId)) != nil
            {
                allowed.insert(room)
            }
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
                let kept = try await workflow.withRoomLocked(orderId) { current in
                    guard ChatRules.mayStay(in: current, userId: identity.userId, role: identity.role) else {
                        socket.leave(room)
                        return false
                    }
                    return true
                }
                if !kept {
                    await namespace.emit("access_revoked", Revoked(orderId: orderId), toRoom: socket.id)
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
        // Emitted at once through the realtime log, to every instance; the event names this instance, so none
        // emits it again from chat.messages.
        let (message, isNew) = try await workflow.send(
            orderId: orderId, identity: identity, clientMessageId: clientMessageId, text: text,
            quickReplyId: request.quickReplyId, originInstanceId: instanceId, originSocketId: socket.id)
        if isNew {
            await namespace.emit(
                "message", try SocketIOArguments(encoding: message), toRooms: [Self.room(orderId)], except: [socket.id],
                dedupeKey: message.id
            )
        }
        return SendReply(id: message.id, sentAt: message.sentAt)
    }

    // MARK: Fan-out

    struct Closed: Codable, Sendable {
        var orderId: String
        var text = ChatLimits.closedText
    }

    struct Revoked: Codable, Sendable { var orderId: String }

    /// chat.messages, on every instance: emits the messages no instance emitted when they were sent, and each
    /// closing; the realtime log delivers the first emit of each. Takes a rider who lost a room out of it.
    func fanOut(_ event: DecodedEvent) async throws {
        if let sent = event.payload(as: ChatMessageSent.self) {
            // The sending instance emitted it at once (its queue to the log is retried until the broker takes it);
            // emitting it again from every instance would double the log's load for the one case of an instance
            // dying between the commit and the append.
            guard sent.originInstanceId == nil else { return }
            let message = ChatMessageView(
                id: sent.messageId, orderId: sent.orderId, senderId: sent.senderId,
                senderRole: sent.senderRole.rawValue,
                senderName: sent.senderName, text: sent.text, sentAt: sent.sentAt, clientMessageId: sent.clientMessageId
            )
            await namespace.emit(
                "message", try SocketIOArguments(encoding: message), toRooms: [Self.room(sent.orderId)],
                except: Set([sent.originSocketId].compactMap { $0 }), dedupeKey: sent.messageId
            )
        } else if let revoked = event.payload(as: ChatAccessRevoked.self) {
            try await revoke(revoked, eventId: event.header.eventId)
        } else if let closed = event.payload(as: ChatClosed.self) {
            await namespace.emit(
                "chat_closed", try SocketIOArguments(encoding: Closed(orderId: closed.orderId)),
                toRooms: [Self.room(closed.orderId)], dedupeKey: closed.orderId)
        }
    }

    /// A rider who lost a room, on every instance: unless the room is theirs again, their sockets here leave it,
    /// with the room's row locked so that no join of theirs is admitted meanwhile; their apps get `access_revoked`
    /// (once, whichever instance emits it first; replayed to a phone that recovers its session).
    func revoke(_ revoked: ChatAccessRevoked, eventId: UUID) async throws {
        let room = Self.room(revoked.orderId)
        let lost = try await workflow.withRoomLocked(revoked.orderId) { current in
            guard !ChatRules.mayStay(in: current, userId: revoked.riderId, role: .rider) else { return false }
            for socket in namespace.sockets(in: room) where socket.identity?.userId == revoked.riderId {
                socket.leave(room)
            }
            return true
        }
        guard lost else { return }
        await namespace.emit(
            "access_revoked", Revoked(orderId: revoked.orderId),
            toRoom: SocketIONamespace.userRoom(revoked.riderId), dedupeKey: eventId.uuidString)
    }
}
