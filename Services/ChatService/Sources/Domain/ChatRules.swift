import Contracts
import Foundation
import ServiceKit

/// Why Chat refused a request; the socket and HTTP edges answer each with its status and code
/// (`Routes/ChatErrors.swift`).
package enum ChatRuleViolation: Error, Equatable, Sendable {
    /// No room yet, or still waiting for a rider.
    case notAvailableYet
    /// Neither the order's customer nor its current rider (nor, for reading, an admin).
    case notParticipant
    /// Reading the history of a room one is not in (admins read every room).
    case notReader
    /// History of an order Chat has never heard of.
    case noChat(orderId: String)
    /// Admins read chats; they do not write in them.
    case adminsReadOnly
    /// The order ended: the room is read-only.
    case closed
    /// A send on a connection that has not joined the room.
    case notJoined
    /// A `clientMessageId` empty or over the limit.
    case invalidClientMessageId
    /// A quick reply id the sender's role does not have.
    case unknownQuickReply(id: String, role: Role)
    case emptyMessage
    case messageTooLong
}

/// Chat's decisions, pure: who may join, read and write a room, what a message's text is, the sender's name, and
/// the push an absent recipient gets.
package enum ChatRules {
    /// What `identity` may do in `room` when joining it: a room waiting for its rider is open to admins only.
    package static func requireJoin(_ room: ChatRoom?, by identity: Identity) throws(ChatRuleViolation) -> ChatAccess {
        // Nothing known of the order yet: for its customer that is "no rider yet", for anyone else too.
        guard let room else { throw .notAvailableYet }
        let access = room.access(for: identity.userId, role: identity.role)
        guard access != .none else { throw .notParticipant }
        if room.status == .waitingForRider, identity.role != .admin { throw .notAvailableYet }
        return access
    }

    /// Whether a socket of `userId` (a `role`) may stay in the Socket.IO room of `room`: they may still read it.
    package static func mayStay(in room: ChatRoom?, userId: String, role: Role) -> Bool {
        guard let room else { return false }
        return room.access(for: userId, role: role) != .none
    }

    /// Checks that `identity` may write in `room` now.
    package static func requireSend(_ room: ChatRoom?, by identity: Identity) throws(ChatRuleViolation) {
        let access = try requireJoin(room, by: identity)
        guard identity.role != .admin else { throw .adminsReadOnly }
        guard room?.status != .closed else { throw .closed }
        guard access == .participant else { throw .notParticipant }
    }

    /// Checks that `identity` may read the history of `room` (`orderId`).
    package static func requireRead(_ room: ChatRoom?, orderId: String, by identity: Identity)
        throws(ChatRuleViolation)
    {
        guard let room else { throw .noChat(orderId: orderId) }
        guard room.access(for: identity.userId, role: identity.role) != .none else { throw .notReader }
    }

    /// The client's id for a message, trimmed, 1 to ``ChatLimits/maximumClientMessageIdLength`` bytes.
    package static func clientMessageId(_ raw: String) throws(ChatRuleViolation) -> String {
        let id = raw.trimmingCharacters(in: .whitespaces)
        guard !id.isEmpty, id.utf8.count <= ChatLimits.maximumClientMessageIdLength else {
            throw .invalidClientMessageId
        }
        return id
    }

    /// The text a message carries: the quick reply's, or the typed text trimmed, not empty and within the limit.
    package static func text(typed: String?, quickReplyId: String?, role: Role, quickReplies: QuickReplies)
        throws(ChatRuleViolation) -> String
    {
        if let quickReplyId {
            guard let reply = quickReplies.replies(for: role).first(where: { $0.id == quickReplyId }) else {
                throw .unknownQuickReply(id: quickReplyId, role: role)
            }
            return reply.text
        }
        let text = (typed ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw .emptyMessage }
        guard Validate.fits(text, maximumCharacters: ChatLimits.maximumMessageLength) else { throw .messageTooLong }
        return text
    }

    /// The name shown with a message: the token's, the room's rider name for its rider, or the role.
    package static func senderName(of identity: Identity, in room: ChatRoom?) -> String {
        identity.name ?? (identity.role == .rider ? room?.rider?.name : nil) ?? identity.role.rawValue.capitalized
    }

    /// The push a recipient without a socket in the room gets: the sender's name and a preview.
    package static func push(for message: ChatMessageView, orderId: String, recipient: String) -> PushRequested {
        let preview = message.text.count > 100 ? String(message.text.prefix(97)) + "..." : message.text
        return PushRequested(
            notificationId: "chat-\(orderId)-\(message.id)", userId: recipient, kind: .chatMessage,
            title: message.senderName,
            body: preview, data: ["link": "app://orders/\(orderId)/chat", "orderId": orderId, "messageId": message.id],
            priority: .high, collapseKey: "chat-\(orderId)", ttlSeconds: 3600, correlationId: orderId
        )
    }
}
