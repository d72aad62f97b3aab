import Contracts
import ServiceKit

/// How the socket and HTTP edges answer Chat's refusals.
extension ChatRuleViolation: APIErrorConvertible {
    package var apiError: APIError {
        switch self {
        case .notAvailableYet:
            .conflict(.chatNotAvailable, "chat opens once a rider is assigned")
        case .notParticipant:
            .forbidden("only the order's customer and its current rider may chat")
        case .notReader:
            .forbidden("only the order's customer, its current rider and admins read its chat")
        case .noChat(let orderId):
            .notFound("no chat for order \(orderId)")
        case .adminsReadOnly:
            .forbidden("admins read chats; they do not write in them")
        case .closed:
            .conflict(.chatClosed, ChatLimits.closedText)
        case .notJoined:
            .forbidden("join the chat on this connection before sending")
        case .invalidClientMessageId:
            .validation("'clientMessageId' must be 1 to \(ChatLimits.maximumClientMessageIdLength) bytes")
        case .unknownQuickReply(let id, let role):
            .validation("no quick reply '\(id)' for \(role.rawValue)s")
        case .emptyMessage:
            .badRequest("the message is empty", code: .emptyMessage)
        case .messageTooLong:
            .badRequest(
                "messages are at most \(Validate.limitDescription(maximumCharacters: ChatLimits.maximumMessageLength))",
                code: .messageTooLong)
        }
    }
}
