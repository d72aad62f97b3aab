import Contracts
import Foundation
import Hummingbird
import ServiceKit

/// The rider's REST API: availability, the pending offer, and answering it.
struct AllocationRoutes: Sendable {
    let database: Database
    let workflow: AllocationWorkflow
    let notifier: RiderNotifier

    struct Availability: Codable, Sendable {
        enum Status: String, Codable, Sendable {
            case online
            case offline
        }

        var status: Status
        var location: RiderLocation?
    }

    /// An operator's choice of rider for an order.
    struct Reassignment: Codable, Sendable {
        var riderId: String
    }

    func register(on api: RouterGroup<ServiceRequestContext>) {
        registerOperatorRoutes(on: api)
        api.put("riders/me/availability") { request, context in
            let identity = try context.requireIdentity(.rider)
            let (input, _) = try await request.decodeJSON(Availability.self, context: context)
            let rider = PersonRef(id: identity.userId, name: identity.name ?? "Rider")
            return try await database.transaction { connection in
                let (view, notices) = try await workflow.setAvailability(
                    rider: rider, online: input.status == .online, location: input.location, on: connection)
                try await notifier.tell(notices, on: connection)
                return view
            }
        }
        api.get("riders/me") { _, context in
            let identity = try context.requireIdentity(.rider)
            return try await database.withConnection { try await workflow.rider(identity.userId, on: $0) }
        }
        api.get("riders/me/offer") { _, context in
            let identity = try context.requireIdentity(.rider)
            guard
                let offer = try await database.withConnection({
                    try await workflow.pendingOffer(riderId: identity.userId, on: $0)
                })
            else {
                throw APIError.notFound("no pending offer", code: .noActiveOffer)
            }
            return offer
        }
        api.post("offers/:id/received") { request, context in
            let (identity, offerId) = try rider(context)
            let body = try await request.collectBody(upTo: 16 * 1024)
            let idempotency = try IdempotentRequest(request: request, body: body, userId: identity.userId)
            return try await database.idempotentTransaction(idempotency) {
                try await workflow.received(offerId, riderId: identity.userId, on: $0)
            }
        }
        api.post("offers/:id/accept") { request, context in
            let (identity, offerId) = try rider(context)
            let body = try await request.collectBody(upTo: 16 * 1024)
            let idempotency = try IdempotentRequest(request: request, body: body, userId: identity.userId)
            let rider = PersonRef(id: identity.userId, name: identity.name ?? "Rider")
            return try await database.idempotentTransaction(idempotency) {
                try await workflow.accept(offerId, rider: rider, on: $0)
            }
        }
        api.post("offers/:id/reject") { request, context in
            let (identity, offerId) = try rider(context)
            let body = try await request.collectBody(upTo: 16 * 1024)
            let idempotency = try IdempotentRequest(request: request, body: body, userId: identity.userId)
            return try await database.idempotentTransaction(idempotency) { connection in
                let (view, notices) = try await workflow.reject(offerId, riderId: identity.userId, on: connection)
                try await notifier.tell(notices, on: connection)
                return view
            }
        }
    }

    /// Admins re-assign an order before pickup, or release it back to allocation (CUS-032 8.2). Answered 202:
    /// Order confirms the change on orders.events.
    private func registerOperatorRoutes(on api: RouterGroup<ServiceRequestContext>) {
        api.get("riders/on-duty") { request, context in
            _ = try context.requireIdentity(.admin)
            let limit = try Validate.pageLimit(
                request.uri.queryParameters.get("limit"), default: 500, maximum: 1000)
            return try await database.withConnection { try await workflow.ridersOnDuty(limit: limit, on: $0) }
        }
        api.get("allocations/:orderId") { _, context in
            _ = try context.requireIdentity(.admin)
            let orderId = try Validate.identifier(try context.parameters.require("orderId"), "orderId")
            return try await database.withConnection { try await workflow.allocation(orderId, on: $0) }
        }
        api.post("allocations/:orderId/reassign") { request, context in
            let identity = try context.requireIdentity(.admin)
            let orderId = try Validate.identifier(try context.parameters.require("orderId"), "orderId")
            let (input, body) = try await request.decodeJSON(Reassignment.self, context: context)
            let riderId = try Validate.identifier(input.riderId, "riderId")
            let idempotency = try IdempotentRequest(request: request, body: body, userId: identity.userId)
            return try await database.idempotentTransaction(idempotency, status: .accepted) { connection in
                let (decision, notices) = try await workflow.reassign(
                    orderId: orderId, to: riderId, by: identity.userId, on: connection)
                try await notifier.tell(notices, on: connection)
                return decision
            }
        }
        api.post("allocations/:orderId/release") { request, context in
            let identity = try context.requireIdentity(.admin)
            let orderId = try Validate.identifier(try context.parameters.require("orderId"), "orderId")
            let body = try await request.collectBody(upTo: 16 * 1024)
            let idempotency = try IdempotentRequest(request: request, body: body, userId: identity.userId)
            return try await database.idempotentTransaction(idempotency, status: .accepted) { connection in
                let (decision, notices) = try await workflow.release(
                    orderId: orderId, by: identity.userId, on: connection)
                try await notifier.tell(notices, on: connection)
                return decision
            }
        }
    }

    private func rider(_ context: ServiceRequestContext) throws -> (Identity, UUID) {
        let identity = try context.requireIdentity(.rider)
        guard let offerId = UUID(uuidString: try context.parameters.require("id")) else {
            throw APIError.notFound("no such offer")
        }
        return (identity, offerId)
    }
}
