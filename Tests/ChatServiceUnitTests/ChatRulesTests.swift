import ChatService
import Contracts
import Foundation
import ServiceKit
import Testing

@Suite("Chat's rules: who joins, reads and writes; what a message says (no database)")
struct ChatRulesTests {
    static let customer = Identity(userId: "customer-1", role: .customer, name: "Asha")
    static let rider = Identity(userId: "rider-1", role: .rider)
    static let admin = Identity(userId: "admin-1", role: .admin)
    static let stranger = Identity(userId: "customer-2", role: .customer)

    static func room(_ status: ChatRoom.Status, rider: Bool = true) -> ChatRoom {
        ChatRoom(
            orderId: "order-1", customerId: "customer-1",
            rider: rider ? PersonRef(id: "rider-1", name: "Ravi") : nil, status: status)
    }

    @Test("a room opens to its customer and rider once a rider is assigned; admins read it; strangers never")
    func joining() throws {
        #expect(try ChatRules.requireJoin(Self.room(.open), by: Self.customer) == .participant)
        #expect(try ChatRules.requireJoin(Self.room(.open), by: Self.rider) == .participant)
        #expect(try ChatRules.requireJoin(Self.room(.open), by: Self.admin) == .readOnly)
        #expect(try ChatRules.requireJoin(Self.room(.closed), by: Self.customer) == .readOnly)
        #expect(throws: ChatRuleViolation.notAvailableYet) {
            try ChatRules.requireJoin(Self.room(.waitingForRider, rider: false), by: Self.customer)
        }
        #expect(throws: ChatRuleViolation.notAvailableYet) { try ChatRules.requireJoin(nil, by: Self.customer) }
        #expect(try ChatRules.requireJoin(Self.room(.waitingForRider, rider: false), by: Self.admin) == .readOnly)
        #expect(throws: ChatRuleViolation.notParticipant) {
            try ChatRules.requireJoin(Self.room(.open), by: Self.stranger)
        }
        #expect(throws: ChatRuleViolation.notParticipant) {
            try ChatRules.requireJoin(Self.room(.open), by: Identity(userId: "rider-2", role: .rider))
        }
    }

    @Test("a socket stays in a room while its user may read it: a rider re-assigned away or released does not")
    func staying() {
        #expect(ChatRules.mayStay(in: Self.room(.open), userId: Self.rider.userId, role: .rider))
        #expect(ChatRules.mayStay(in: Self.room(.closed), userId: Self.rider.userId, role: .rider))
        #expect(ChatRules.mayStay(in: Self.room(.open), userId: Self.admin.userId, role: .admin))
        #expect(
            !ChatRules.mayStay(in: Self.room(.waitingForRider, rider: false), userId: Self.rider.userId, role: .rider))
        #expect(!ChatRules.mayStay(in: Self.room(.open), userId: Self.stranger.userId, role: .customer))
        #expect(!ChatRules.mayStay(in: nil, userId: Self.customer.userId, role: .customer))
    }

    @Test("only participants write, and only while the room is open; admins only read")
    func sending() throws {
        try ChatRules.requireSend(Self.room(.open), by: Self.customer)
        try ChatRules.requireSend(Self.room(.open), by: Self.rider)
        #expect(throws: ChatRuleViolation.closed) { try ChatRules.requireSend(Self.room(.closed), by: Self.rider) }
        #expect(throws: ChatRuleViolation.adminsReadOnly) {
            try ChatRules.requireSend(Self.room(.open), by: Self.admin)
        }
        try ChatRules.requireRead(Self.room(.closed), orderId: "order-1", by: Self.admin)
        #expect(throws: ChatRuleViolation.notReader) {
            try ChatRules.requireRead(Self.room(.open), orderId: "order-1", by: Self.stranger)
        }
        #expect(throws: ChatRuleViolation.noChat(orderId: "order-9")) {
            try ChatRules.requireRead(nil, orderId: "order-9", by: Self.customer)
        }
    }

    @Test("a message is its quick reply's text or the typed text, trimmed, not empty, within the limit in bytes too")
    func text() throws {
        let replies = QuickReplies.standard
        #expect(
            try ChatRules.text(typed: nil, quickReplyId: "arrived", role: .rider, quickReplies: replies)
                == "I have arrived")
        #expect(throws: ChatRuleViolation.unknownQuickReply(id: "arrived", role: .customer)) {
            try ChatRules.text(typed: nil, quickReplyId: "arrived", role: .customer, quickReplies: replies)
        }
        #expect(
            try ChatRules.text(typed: "  Thanks \n", quickReplyId: nil, role: .customer, quickReplies: replies)
                == "Thanks")
        #expect(throws: ChatRuleViolation.emptyMessage) {
            try ChatRules.text(typed: " \n ", quickReplyId: nil, role: .customer, quickReplies: replies)
        }
        let longest = String(repeating: "a", count: ChatLimits.maximumMessageLength)
        #expect(try ChatRules.text(typed: longest, quickReplyId: nil, role: .rider, quickReplies: replies) == longest)
        #expect(throws: ChatRuleViolation.messageTooLong) {
            try ChatRules.text(typed: longest + "a", quickReplyId: nil, role: .rider, quickReplies: replies)
        }
        let accents = "a" + String(repeating: "\u{301}", count: 20_000)
        #expect(throws: ChatRuleViolation.messageTooLong) {
            try ChatRules.text(typed: accents, quickReplyId: nil, role: .rider, quickReplies: replies)
        }
        #expect(try ChatRules.clientMessageId(" m-1 ") == "m-1")
        #expect(throws: ChatRuleViolation.invalidClientMessageId) { try ChatRules.clientMessageId("  ") }
        #expect(throws: ChatRuleViolation.invalidClientMessageId) {
            try ChatRules.clientMessageId(String(repeating: "é", count: 33))
        }
    }

    @Test("the sender's name and the push to an absent recipient")
    func senderAndPush() {
        #expect(ChatRules.senderName(of: Self.customer, in: Self.room(.open)) == "Asha")
        #expect(ChatRules.senderName(of: Self.rider, in: Self.room(.open)) == "Ravi")
        #expect(ChatRules.senderName(of: Self.rider, in: nil) == "Rider")
        let message = ChatMessageView(
            id: "42", orderId: "order-1", senderId: "rider-1", senderRole: "rider", senderName: "Ravi",
            text: String(repeating: "x", count: 150), sentAt: Date(timeIntervalSince1970: 0), clientMessageId: "m-1")
        let push = ChatRules.push(for: message, orderId: "order-1", recipient: "customer-1")
        #expect(push.title == "Ravi")
        #expect(push.body.count == 100)
        #expect(push.body.hasSuffix("..."))
        #expect(push.collapseKey == "chat-order-1")
        #expect(push.notificationId == "chat-order-1-42")
        #expect(push.data["link"] == "app://orders/order-1/chat")
    }
}
