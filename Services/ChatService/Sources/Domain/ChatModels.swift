import Contracts
import Foundation
import Hummingbird

// The service's value types, kept together: each is a few lines and they are read together.

/// A chat room: the order's customer and current rider, open or closed.
package struct ChatRoom: Sendable, Equatable {
    package enum Status: String, Sendable {
        case waitingForRider = "waiting_for_rider"
        case open
        case closed
    }

    package var orderId: String
    package var customerId: String
    package var rider: PersonRef?
    package var status: Status

    package init(orderId: String, customerId: String, rider: PersonRef?, status: Status) {
        self.orderId = orderId
        self.customerId = customerId
        self.rider = rider
        self.status = status
    }

    /// The Socket.IO room of an order's chat on `/chat`.
    package static func socketRoom(_ orderId: String) -> String { socketRoomPrefix + orderId }
    package static let socketRoomPrefix = "order:"

    /// What `identity` may do in this room.
    package func access(for userId: String, role: Role) -> ChatAccess {
        switch role {
        case .admin: return .readOnly
        case .customer where userId == customerId: return status == .closed ? .readOnly : .participant
        case .rider where userId == rider?.id: return status == .closed ? .readOnly : .participant
        default: return .none
        }
    }

    /// The other party of a participant.
    package func counterpart(of userId: String) -> String? {
        userId == customerId ? rider?.id : customerId
    }
}

/// What a user may do in a room.
package enum ChatAccess: Sendable, Equatable {
    case participant
    case readOnly
    case none
}

/// A stored message as apps see it.
package struct ChatMessageView: Codable, Sendable, Equatable {
    package var id: String
    package var orderId: String
    package var senderId: String?
    /// `customer`, `rider`, or `system` for the room's own notices ("This chat is now closed").
    package var senderRole: String
    package var senderName: String
    package var text: String
    package var sentAt: Date
    package var clientMessageId: String?

    package init(
        id: String, orderId: String, senderId: String?, senderRole: String, senderName: String, text: String,
        sentAt: Date, clientMessageId: String?
    ) {
        self.id = id
        self.orderId = orderId
        self.senderId = senderId
        self.senderRole = senderRole
        self.senderName = senderName
        self.text = text
        self.sentAt = sentAt
        self.clientMessageId = clientMessageId
    }
}

extension ChatMessageView: ResponseEncodable {}

/// A template the apps offer for one tap ("Please leave it at the door").
package struct QuickReply: Codable, Sendable, Equatable {
    package var id: String
    package var text: String
}

/// The quick replies per role, configurable with `CHAT_QUICK_REPLIES_FILE` (JSON `{"customer":[...],"rider":[...]}`).
package struct QuickReplies: Codable, Sendable {
    package var customer: [QuickReply]
    package var rider: [QuickReply]

    package static let standard = QuickReplies(
        customer: [
            QuickReply(id: "leave-at-door", text: "Please leave it at the door"),
            QuickReply(id: "call-on-arrival", text: "Please call me when you arrive"),
            QuickReply(id: "ring-bell", text: "Please ring the bell"),
            QuickReply(id: "on-my-way-down", text: "I'm coming down"),
        ],
        rider: [
            QuickReply(id: "arrived", text: "I have arrived"),
            QuickReply(id: "on-my-way", text: "I'm on my way"),
            QuickReply(id: "cant-find-address", text: "I can't find your address, could you guide me?"),
            QuickReply(id: "running-late", text: "Running a few minutes late, sorry!"),
        ]
    )

    package func replies(for role: Role) -> [QuickReply] {
        role == .rider ? rider : customer
    }
}

/// Chat's limits.
package enum ChatLimits {
    /// The longest message, in characters after trimming (and four times as many bytes of UTF-8).
    package static let maximumMessageLength = 500
    /// Messages returned when joining.
    package static let joinHistory = 20
    /// The longest client message id, in bytes.
    package static let maximumClientMessageIdLength = 64
    /// The text of the closing system message.
    package static let closedText = "This chat is now closed"
}

/// `access_revoked`: the rider was moved off the order, and the chat is no longer theirs.
package struct AccessRevoked: Codable, Sendable, Equatable {
    package var orderId: String
}

/// `chat_closed`: the order ended, and the chat is read-only.
package struct ChatClosedNotice: Codable, Sendable, Equatable {
    package var orderId: String
    package var text = ChatLimits.closedText
}
