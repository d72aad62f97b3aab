import Foundation

// One file per area's topics: the payloads published on chat.messages and chat.access, which travel together.

/// A chat message was stored (chat.messages, keyed by order id); its `message` emit to the order's room was written
/// in the same transaction.
package struct ChatMessageSent: EventPayload {
    package static let eventType = "ChatMessageSent"
    package static let topic = Topic.chatMessages
    package var messageId: String
    package var orderId: String
    package var senderId: String
    package var senderRole: Role
    package var senderName: String
    package var text: String
    package var clientMessageId: String
    package var sentAt: Date
    package init(
        messageId: String, orderId: String, senderId: String, senderRole: Role, senderName: String, text: String,
        clientMessageId: String, sentAt: Date
    ) {
        self.messageId = messageId
        self.orderId = orderId
        self.senderId = senderId
        self.senderRole = senderRole
        self.senderName = senderName
        self.text = text
        self.clientMessageId = clientMessageId
        self.sentAt = sentAt
    }
}

/// A rider lost an order's chat (re-assigned away, or the order went back to allocation): written in the same
/// transaction as chat's room changes, so every instance removes the rider's sockets only once the change is
/// committed and no join can let them back in.
package struct ChatAccessRevoked: EventPayload {
    package static let eventType = "ChatAccessRevoked"
    package static let topic = Topic.chatAccess
    package var orderId: String
    package var riderId: String
    package var revokedAt: Date
    package init(orderId: String, riderId: String, revokedAt: Date) {
        self.orderId = orderId
        self.riderId = riderId
        self.revokedAt = revokedAt
    }
}

/// The order ended; its chat is read-only from now on.
package struct ChatClosed: EventPayload {
    package static let eventType = "ChatClosed"
    package static let topic = Topic.chatMessages
    package var orderId: String
    package var reason: String
    package var closedAt: Date
    package init(orderId: String, reason: String, closedAt: Date) {
        self.orderId = orderId
        self.reason = reason
        self.closedAt = closedAt
    }
}
