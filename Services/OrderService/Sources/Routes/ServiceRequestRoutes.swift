import Contracts
import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit

/// Service requests (US-072): a customer asks for a technician visit; an admin assigns a technician; the
/// technician reports OnTheWay, WorkInProgress, Completed. Same event log, outbox and authorization rules as orders.
package struct ServiceRequestRoutes: Sendable {
    let database: Database
    let store: OrderStore
    let now: Now

    struct CreateServiceRequest: Codable, Sendable {
        var serviceAddress: Address
        var description: String
    }

    struct AssignTechnician: Codable, Sendable {
        var technicianId: String
        var technicianName: String
    }

    struct ChangeStatus: Codable, Sendable {
        var status: ServiceRequestStatus
    }

    package func register(on api: RouterGroup<ServiceRequestContext>) {
        api.post("service-requests") { request, context in try await create(request, context) }
        api.get("service-requests/:id") { _, context in try await get(context) }
        api.get("service-requests/:id/events") { _, context in try await events(context) }
        api.post("service-requests/:id/assign") { request, context in
            let (input, body) = try await request.decodeJSON(AssignTechnician.self, context: context)
            let technician = PersonRef(
                id: try Validate.identifier(input.technicianId, "technicianId"),
                name: try Validate.text(input.technicianName, "technicianName", maximum: 100)
            )
            return try await transition(.assign(technician), request, body, context)
        }
        api.post("service-requests/:id/status") { request, context in
            let (input, body) = try await request.decodeJSON(ChangeStatus.self, context: context)
            guard [.onTheWay, .workInProgress, .completed].contains(input.status) else {
                throw APIError.validation("'status' must be OnTheWay, WorkInProgress or Completed")
            }
            return try await transition(.advance(to: input.status), request, body, context)
        }
        api.post("service-requests/:id/cancel") { request, context in
            let body = try await request.collectBody(upTo: 16 * 1024)
            return try await transition(.cancel, request, body, context)
        }
    }

    func create(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let identity = try context.requireIdentity(.customer)
        let (input, body) = try await request.decodeJSON(CreateServiceRequest.self, context: context)
        let address = try Validate.address(input.serviceAddress, "serviceAddress")
        let description = try Validate.text(input.description, "description", maximum: 1000)
        let idempotency = try IdempotentRequest(request: request, body: body, userId: identity.userId)
        return try await database.idempotentTransaction(idempotency, status: .created) { connection in
            let now = self.now()
            let view = ServiceRequestView(
                id: UUID().uuidString.lowercased(), status: .requested, customerId: identity.userId,
                serviceAddress: address, description: description,
                technician: nil, version: 1, createdAt: now, updatedAt: now
            )
            try await store.insertServiceRequest(view, on: connection)
            let id = view.id
            try await store.record(
                EventEnvelope(
                    aggregateId: id, occurredAt: now,
                    payload: ServiceRequestCreated(
                        requestId: id, customerId: identity.userId, serviceAddress: address, description: description)
                ),
                aggregateType: "service_request", sequence: 1,
                actor: OrderActor(id: identity.userId, role: identity.role),
                on: connection
            )
            return view
        }
    }

    func visible(_ context: ServiceRequestContext) async throws -> ServiceRequestView {
        let identity = try context.requireIdentity()
        let id = try context.parameters.require("id", as: UUID.self)
        let view = try await database.withConnection { try await store.serviceRequest(id, on: $0) }
        guard view.isVisible(to: identity.userId, role: identity.role) else {
            throw APIError.forbidden("only the request's customer, its technician or an admin may see it")
        }
        return view
    }

    func get(_ context: ServiceRequestContext) async throws -> ServiceRequestView {
        try await visible(context)
    }

    struct EventLog: Codable, Sendable, ResponseEncodable {
        var requestId: String
        var events: [OrderEventView]
    }

    func events(_ context: ServiceRequestContext) async throws -> EventLog {
        let view = try await visible(context)
        let events = try await database.withConnection {
            try await store.events(of: UUID(uuidString: view.id)!, on: $0)
        }
        return EventLog(requestId: view.id, events: events)
    }

    func transition(
        _ action: ServiceRequestAction, _ request: Request, _ body: ByteBuffer, _ context: ServiceRequestContext
    ) async throws -> Response {
        let identity = try context.requireIdentity()
        let id = try context.parameters.require("id", as: UUID.self)
        let actor = OrderActor(id: identity.userId, role: identity.role)
        let idempotency = try IdempotentRequest(request: request, body: body, userId: identity.userId)
        return try await database.idempotentTransaction(idempotency) { connection in
            var view = try await store.serviceRequest(id, forUpdate: true, on: connection)
            let next = try ServiceRequestRules.apply(action, to: view.snapshot, by: actor)
            let now = self.now()
            view.status = next.status
            view.technician = next.technician
            view.version += 1
            view.updatedAt = now
            try await store.update(view, on: connection)
            let requestId = view.id
            if case .assign(let technician) = action {
                try await store.record(
                    EventEnvelope(
                        aggregateId: requestId, occurredAt: now,
                        payload: ServiceRequestAssigned(
                            requestId: requestId, customerId: view.customerId, technician: technician,
                            serviceAddress: view.serviceAddress
                        )
                    ),
                    aggregateType: "service_request", sequence: view.version, actor: actor, on: connection
                )
            } else {
                try await store.record(
                    EventEnvelope(
                        aggregateId: requestId, occurredAt: now,
                        payload: ServiceRequestStatusChanged(
                            requestId: requestId, customerId: view.customerId, technician: view.technician,
                            status: view.status,
                            serviceAddress: view.serviceAddress
                        )
                    ),
                    aggregateType: "service_request", sequence: view.version, actor: actor, on: connection
                )
            }
            return view
        }
    }
}
