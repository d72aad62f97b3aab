import Contracts
import Foundation
import Logging
import PostgresNIO
import Realtime
import RealtimePlatform
import ServiceKit
import Synchronization

/// The `/chat` namespace's events and the projections that feed it.
package struct ChatHandlers: Sendable {
    let database: Database
    let store: ChatStore
    let outbox: Outbox
    let namespace: SocketIONamespace
    let settings: ChatSettings
    let instanceId: String
    let delivered: RecentIds
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

    /// The room of `orderId` and what `socket`'s user may do there; errors as the apps expect them.
    private func access(_ orderId: String, for identity: Identity, on connection: PostgresConnection) async throws
        -> (ChatRoom, ChatAccess)
    {
        let room = try await store.room(orderId, on: connection)
        guard let room else {
            // Nothing known of the order yet: for its customer that is "no rider yet", for anyone else too.
            throw APIError.conflict(.chatNotAvailable, "chat opens once a rider is assigned")
        }
        let access = room.access(for: identity.userId, role: identity.role)
        guard access != .none else {
            throw APIError.forbidden("only the order's customer and its current rider may chat")
        }
        if room.status == .waitingForRider, identity.role != .admin {
            throw APIError.conflict(.chatNotAvailable, "chat opens once a rider is assigned")
        }
        return (room, access)
    }

    func join(_ socket: SocketIOSocket, _ request: JoinRequest) async throws -> JoinReply {
        guard let identity = socket.identity else { throw APIError.unauthorized("not signed in") }
        let orderId = try Validate.identifier(request.orderId, "orderId")
        let reply = try await database.transaction { connection in
            let (room, access) = try await self.access(orderId, for: identity, on: connection)
            let history = try await store.messages(
                orderId: orderId, before: nil, limit: ChatLimits.joinHistory, on: connection)
            try await store.enter(
                socketId: socket.id, orderId: orderId, userId: identity.userId, instanceId: instanceId, on: connection)
            return JoinReply(readOnly: access == .readOnly, rider: room.rider, messages: history.reversed())
        }
        socket.join(Self.room(orderId))
        return reply
    }

    func leave(_ socket: SocketIOSocket, _ request: JoinRequest) async throws -> Left {
        socket.leave(Self.room(request.orderId))
        try await database.withConnection { try await store.leave(socketId: socket.id, on: $0) }
        return Left()
    }

    func send(_ socket: SocketIOSocket, _ request: SendRequest) async throws -> SendReply {
        guard let identity = socket.identity else { throw APIError.unauthorized("not signed in") }
        let orderId = try Validate.identifier(request.orderId, "orderId")
        // Only a socket in the room sends: a rider re-assigned away has left it the moment they were told, even
        // while this instance's projection of the order has not caught up yet.
        guard socket.rooms.contains(Self.room(orderId)) else {
            throw APIError.forbidden("join the chat on this connection before sending")
        }
        let clientMessageId = request.clientMessageId.trimmingCharacters(in: .whitespaces)
        guard !clientMessageId.isEmpty, clientMessageId.utf8.count <= ChatLimits.maximumClientMessageIdLength else {
            throw APIError.validation("'clientMessageId' must be 1 to \(ChatLimits.maximumClientMessageIdLength) bytes")
        }
        let text: String
        if let quickReplyId = request.quickReplyId {
            guard let reply = settings.quickReplies.replies(for: identity.role).first(where: { $0.id == quickReplyId })
            else {
                throw APIError.validation("no quick reply '\(quickReplyId)' for \(identity.role.rawValue)s")
            }
            text = reply.text
        } else {
            text = (request.text ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            guard !text.isEmpty else { throw APIError.badRequest("the message is empty", code: .emptyMessage) }
            guard Validate.fits(text, maximumCharacters: ChatLimits.maximumMessageLength) else {
                throw APIError.badRequest(
                    "messages are at most \(Validate.limitDescription(maximumCharacters: ChatLimits.maximumMessageLength))",
                    code: .messageTooLong
                )
            }
        }
        let (message, isNew) = try await database.transaction { connection in
            let (room, access) = try await self.access(orderId, for: identity, on: connection)
            guard identity.role != .admin else {
                throw APIError.forbidden("admins read chats; they do not write in them")
            }
            guard room.status != .closed else { throw APIError.conflict(.chatClosed, ChatLimits.closedText) }
            guard access == .participant else {
                throw APIError.forbidden("only the order's customer and its current rider may chat")
            }
            let senderName =
                identity.name ?? (identity.role == .rider ? room.rider?.name : nil)
                ?? identity.role.rawValue.capitalized
            let (message, isNew) = try await store.insert(
                orderId: orderId, senderId: identity.userId, senderRole: identity.role.rawValue, senderName: senderName,
                text: text,
                quickReplyId: request.quickReplyId, clientMessageId: clientMessageId, on: connection
            )
            guard isNew else { return (message, false) }
            try await outbox.enqueue(
                ChatMessageSent(
                    messageId: message.id, orderId: orderId, senderId: identity.userId, senderRole: identity.role,
                    senderName: senderName,
                    text: text, clientMessageId: clientMessageId, sentAt: message.sentAt
                ),
                aggregateId: orderId, on: connection, logger: logger
            )
            if let recipient = room.counterpart(of: identity.userId),
                try await !store.isPresent(
                    userId: recipient, orderId: orderId, freshness: settings.presenceFreshness, on: connection)
            {
                try await outbox.enqueue(
                    Self.push(for: message, orderId: orderId, recipient: recipient), aggregateId: recipient,
                    on: connection, logger: logger
                )
            }
            return (message, true)
        }
        if isNew {
            delivered.insert(message.id)
            await namespace.emit(
                "message", try SocketIOArguments(encoding: message), toRooms: [Self.room(orderId)], except: [socket.id],
                localOnly: true
            )
        }
        return SendReply(id: message.id, sentAt: message.sentAt)
    }

    /// The push a recipient without a socket in the room gets: the sender's name and a preview.
    static func push(for message: ChatMessageView, orderId: String, recipient: String) -> PushRequested {
        let preview = message.text.count > 100 ? String(message.text.prefix(97)) + "..." : message.text
        return PushRequested(
            notificationId: "chat-\(orderId)-\(message.id)", userId: recipient, kind: .chatMessage,
            title: message.senderName,
            body: preview, data: ["link": "app://orders/\(orderId)/chat", "orderId": orderId, "messageId": message.id],
            priority: .high, collapseKey: "chat-\(orderId)", ttlSeconds: 3600, correlationId: orderId
        )
    }

    // MARK: Projections and fan-out

    /// orders.events, once per service (inbox): keep rooms in step with orders; close them with a system message.
    func project(_ event: DecodedEvent, on connection: PostgresConnection) async throws {
        switch event.payload {
        case let created as OrderCreated:
            try await store.openRoom(orderId: created.orderId, customerId: created.customerId, on: connection)
        case let assigned as RiderAssigned:
            _ = try await store.assign(
                assigned.rider, orderId: assigned.orderId, customerId: assigned.customerId, on: connection)
        case let reassigned as RiderReassigned:
            _ = try await store.assign(
                reassigned.rider, orderId: reassigned.orderId, customerId: reassigned.customerId, on: connection)
        case let delivered as OrderDelivered:
            try await close(
                delivered.orderId, customerId: delivered.customerId, reason: "OrderDelivered", on: connection)
        case let cancelled as OrderCancelled:
            try await close(
                cancelled.orderId, customerId: cancelled.customerId, reason: "OrderCancelled", on: connection)
        default:
            break
        }
    }

    private func close(_ orderId: String, customerId: String, reason: String, on connection: PostgresConnection)
        async throws
    {
        guard
            let message = try await store.close(
                orderId: orderId, customerId: customerId, reason: reason, on: connection)
        else { return }
        try await outbox.enqueue(
            ChatClosed(orderId: orderId, reason: reason, closedAt: message.sentAt), aggregateId: orderId,
            on: connection, logger: logger)
    }

    struct Closed: Codable, Sendable {
        var orderId: String
        var text = ChatLimits.closedText
    }

    struct Revoked: Codable, Sendable { var orderId: String }

    /// chat.messages, on every instance: deliver messages sent through other instances; announce closings.
    func fanOut(_ event: DecodedEvent) async throws {
        if let sent = event.payload(as: ChatMessageSent.self) {
            guard !delivered.contains(sent.messageId) else { return }
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

    /// orders.events, on every instance: a rider re-assigned away loses the room at once.
    func revoke(_ event: DecodedEvent) async throws {
        guard let reassigned = event.payload(as: RiderReassigned.self) else { return }
        let room = Self.room(reassigned.orderId)
        let arguments = try SocketIOArguments(encoding: Revoked(orderId: reassigned.orderId))
        for socket in namespace.sockets(in: room) where socket.identity?.userId == reassigned.previousRiderId {
            socket.emit("access_revoked", arguments)
            socket.leave(room)
        }
    }
}

/// Ids of messages this instance already delivered to its sockets, so the fan-out skips them. Bounded: two
/// generations of `capacity` ids each; the older is dropped when the newer fills.
package final class RecentIds: Sendable {
    private let state = Mutex<(current: Set<String>, previous: Set<String>)>(([], []))
    private let capacity: Int

    package init(capacity: Int = 10_000) { self.capacity = capacity }

    package func insert(_ id: String) {
        state.withLock { state in
            state.current.insert(id)
            if state.current.count >= capacity {
                state.previous = state.current
                state.current = []
            }
        }
    }

    package func contains(_ id: String) -> Bool {
        state.withLock { $0.current.contains(id) || $0.previous.contains(id) }
    }
}
