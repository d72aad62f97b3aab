import Contracts
import Foundation
import Hummingbird
import ServiceKit

/// Chat history and quick replies over HTTP.
struct ChatRoutes: Sendable {
    let workflow: ChatWorkflow
    let settings: ChatSettings

    struct History: Codable, Sendable, ResponseEncodable {
        var orderId: String
        /// Newest first.
        var messages: [ChatMessageView]
        /// Pass as `before` for the next (older) page; absent on the last page.
        var nextBefore: String?
    }

    struct Replies: Codable, Sendable, ResponseEncodable {
        var role: Role
        var replies: [QuickReply]
    }

    func register(on api: RouterGroup<ServiceRequestContext>) {
        api.get("orders/:orderId/chat/messages") { request, context in try await history(request, context) }
        api.get("chat/quick-replies") { request, context in try quickReplies(request, context) }
    }

    func history(_ request: Request, _ context: ServiceRequestContext) async throws -> History {
        let identity = try context.requireIdentity()
        let orderId = try Validate.identifier(try context.parameters.require("orderId"), "orderId")
        let limit = try Validate.pageLimit(request.uri.queryParameters.get("limit"), default: ChatLimits.joinHistory)
        var before: Int64?
        if let text = request.uri.queryParameters.get("before") {
            guard let value = Int64(text), value > 0 else { throw APIError.validation("'before' must be a message id") }
            before = value
        }
        let page = try await workflow.history(orderId: orderId, identity: identity, before: before, limit: limit)
        return History(orderId: orderId, messages: page, nextBefore: page.count == limit ? page.last?.id : nil)
    }

    func quickReplies(_ request: Request, _ context: ServiceRequestContext) throws -> Replies {
        let identity = try context.requireIdentity()
        let role: Role
        if let text = request.uri.queryParameters.get("role") {
            guard let value = Role(rawValue: text), value == .customer || value == .rider else {
                throw APIError.validation("'role' must be customer or rider")
            }
            role = value
        } else {
            role = identity.role == .rider ? .rider : .customer
        }
        return Replies(role: role, replies: settings.quickReplies.replies(for: role))
    }
}
