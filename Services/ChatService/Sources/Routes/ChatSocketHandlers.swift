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

    package static func room(_ orderId: String) -> String { "order:\(orderId)" }

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
        let joined = try await workflow.join(
            orderId: orderId, identity: identity, socketId: socket.id, instanceId: instanceId)
        socket.join(Self.room(orderId))
        return JoinReply(readOnly: joined.access == .readOnly, rider: joined.rider, messages: joined.history)
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
        // This instance delivers the message to its own sockets; its event names this instance as the origin,
        // so the fan-out here skips it, whatever the timing, and every other instance delivers it once.
        let (message, isNew) = try await workflow.send(
            orderId: orderId, identity: identity, clientMessageId: clientMessageId, text: text,
            quickReplyId: request.quickReplyId, originInstanceId: instanceId)
        if isNew {
            await namespace.emit(
                "message", try SocketIOArguments(encoding: message), toRooms: [Self.room(orderId)], except: [socket.id],
                localOnly: true
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

    /// chat.messages, on every instance: deliver messages sent through other instances; announce closings.
    func fanOut(_ event: DecodedEvent) async throws {
        if let sent = event.payload(as: ChatMessageSent.self) {
            guard sent.originInstanceId != instanceId else { return }
            let message = ChatMessageView(
                id: sent.messageId, orderId: sent.orderId, senderId: sent.senderId,
                senderRole: sent.senderRole.rawValue,
                senderName: sent.senderName, text: sent.text, sentAt: sent.sentAt, clientMessageId: sent.clientMessageId
            )
            let senderSockets = namespace.sockets(in: SocketIONamespace.userRoom(sent.senderId)).map(\.id)
            await namespace.emit(
                "message", try SocketIOArguments(encoding: message), toRooms: [Self.room(sent.orderId)],
                except: Set(senderSockets),
                localOnly: true
            )
        } else if let closed = event.payload(as: ChatClosed.self) {
            await namespace.emit(
                "chat_closed", try SocketIOArguments(encoding: Closed(orderId: closed.orderId)),
                toRooms: [Self.room(closed.orderId)], localOnly: true)
        }
    }

    /// orders.events, on every instance: a rider re-assigned away, or released by an operator, loses the room at
    /// once.
    func revoke(_ event: DecodedEvent) async throws {
        let orderId: String
        let previousRiderId: String
        switch event.payload {
        case let reassigned as RiderReassigned:
            (orderId, previousRiderId) = (reassigned.orderId, reassigned.previousRiderId)
        case let unassigned as RiderUnassigned:
            (orderId, previousRiderId) = (unassigned.orderId, unassigned.previousRiderId)
        default: return
        }
        let room = Self.room(orderId)
        let arguments = try SocketIOArguments(encoding: Revoked(orderId: orderId))
        for socket in namespace.sockets(in: room) where socket.identity?.userId == previousRiderId {
            socket.emit("access_revoked", arguments)
            socket.leave(room)
        }
    }
}
