import Contracts
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceKit

/// The order service's REST API under `/v1`; every route needs a bearer token and checks role and ownership.
package struct OrderRoutes: Sendable {
    let database: Database
    let store: OrderStore
    let workflow: OrderWorkflow
    let sagas: PickupSagas
    let settings: OrderServiceSettings

    struct CreateVendor: Codable, Sendable {
        var id: String
        var name: String
        var address: Address
    }

    /// The body of `POST /v1/orders` (package-visible for the HTTP JSON fuzz target).
    package struct CreateOrder: Codable, Sendable {
        package var vendorId: String
        package var deliveryAddress: Address
        package var paymentMode: PaymentMode
        package var totalAmount: Decimal
        package var requiresPhotoProof: Bool
    }

    struct CancelOrder: Codable, Sendable {
        var reason: String?
    }

    /// A page of a vendor's orders; `nextAfter` fetches the next one and is absent on the last page.
    struct VendorOrders: Codable, Sendable, ResponseEncodable {
        var vendorId: String
        var orders: [OrderView]
        var nextAfter: String?
    }

    struct EventLog: Codable, Sendable, ResponseEncodable {
        var orderId: String
        var events: [OrderEventView]
    }

    package func register(on api: RouterGroup<ServiceRequestContext>) {
        api.post("vendors") { request, context in try await createVendor(request, context) }
        api.get("vendors/:id") { _, context in try await getVendor(context) }
        api.get("vendors/:id/orders") { request, context in try await vendorOrders(request, context) }
        api.post("orders") { request, context in try await createOrder(request, context) }
        api.get("orders/:id") { _, context in try await getOrder(context) }
        api.get("orders/:id/events") { _, context in try await events(context) }
        api.get("orders/:id/saga") { _, context in try await saga(context) }
        api.post("orders/:id/proof-photo") { request, context in try await uploadProofPhoto(request, context) }
        let transitions: [(String, OrderAction)] = [
            ("accept", .accept), ("ready", .markReady), ("arrived", .arrive), ("pickup", .pickUp),
            ("deliver", .deliver),
            ("cancel", .cancel),
        ]
        for (path, action) in transitions {
            api.post("orders/:id/\(path)") { request, context in try await transition(action, request, context) }
        }
    }

    // MARK: Vendors

    func createVendor(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let identity = try context.requireIdentity(.admin)
        let (input, body) = try await request.decodeJSON(CreateVendor.self, context: context)
        let vendor = VendorView(
            id: try Validate.identifier(input.id, "id"), name: try Validate.text(input.name, "name"),
            address: try Validate.address(input.address, "address")
        )
        let idempotency = try IdempotentRequest(request: request, body: body, userId: identity.userId)
        return try await database.idempotentTransaction(idempotency, status: .created) { connection in
            try await store.insertVendor(vendor, on: connection)
            return vendor
        }
    }

    func getVendor(_ context: ServiceRequestContext) async throws -> VendorView {
        _ = try context.requireIdentity()
        let id = try context.parameters.require("id")
        guard let vendor = try await database.withConnection({ try await store.vendor(id, on: $0) }) else {
            throw APIError.notFound("no vendor \(id)")
        }
        return vendor
    }

    /// A vendor dashboard's orders (`me` for the calling vendor; an admin names any vendor): those not yet delivered
    /// or cancelled, or every one with `state=all`; oldest first, `limit` (default 50) at a time.
    func vendorOrders(_ request: Request, _ context: ServiceRequestContext) async throws -> VendorOrders {
        let identity = try context.requireIdentity(.vendor, .admin)
        let named = try context.parameters.require("id")
        let vendorId: String
        if named == "me" {
            guard identity.role == .vendor else { throw APIError.validation("'me' names a vendor; an admin names one") }
            vendorId = identity.userId
        } else {
            vendorId = try Validate.identifier(named, "id")
        }
        guard identity.role == .admin || vendorId == identity.userId else {
            throw APIError.forbidden("a vendor sees only its own orders")
        }
        let query = request.uri.queryParameters
        let limit = try Validate.pageLimit(query.get("limit"), default: 50)
        let activeOnly: Bool
        switch query.get("state") {
        case nil, "active": activeOnly = true
        case "all": activeOnly = false
        default: throw APIError.validation("'state' must be 'active' or 'all'")
        }
        var cursor: OrderPageCursor?
        if let text = query.get("after") {
            guard let parsed = OrderPageCursor(text: text) else {
                throw APIError.validation("'after' must be the nextAfter of a previous page")
            }
            cursor = parsed
        }
        let page = try await database.withConnection {
            try await store.orders(ofVendor: vendorId, activeOnly: activeOnly, after: cursor, limit: limit, on: $0)
        }
        return VendorOrders(vendorId: vendorId, orders: page.orders, nextAfter: page.next?.text)
    }

    // MARK: Orders

    func createOrder(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let identity = try context.requireIdentity(.customer)
        let (input, body) = try await request.decodeJSON(CreateOrder.self, context: context)
        let address = try Validate.address(input.deliveryAddress, "deliveryAddress")
        try Validate.amount(input.totalAmount, "totalAmount", maximum: 10_000_000)
        let vendorId = try Validate.identifier(input.vendorId, "vendorId")
        let idempotency = try IdempotentRequest(request: request, body: body, userId: identity.userId)
        return try await database.idempotentTransaction(idempotency, status: .created) { connection in
            try await workflow.create(
                by: OrderActor(id: identity.userId, role: identity.role), vendorId: vendorId, deliveryAddress: address,
                paymentMode: input.paymentMode, totalAmount: input.totalAmount,
                requiresPhotoProof: input.requiresPhotoProof, on: connection)
        }
    }

    /// The order, if the caller is a party to it (403 otherwise).
    func visibleOrder(_ context: ServiceRequestContext) async throws -> OrderView {
        let identity = try context.requireIdentity()
        let id = try context.parameters.require("id", as: UUID.self)
        let order = try await database.withConnection { try await store.order(id, on: $0) }
        guard order.isVisible(to: identity.userId, role: identity.role) else {
            throw APIError.forbidden("only the order's customer, vendor, assigned rider or an admin may see it")
        }
        return order
    }

    func getOrder(_ context: ServiceRequestContext) async throws -> OrderView {
        try await visibleOrder(context)
    }

    func events(_ context: ServiceRequestContext) async throws -> EventLog {
        let order = try await visibleOrder(context)
        let events = try await database.withConnection {
            try await store.events(of: UUID(uuidString: order.id)!, on: $0)
        }
        return EventLog(orderId: order.id, events: events)
    }

    func saga(_ context: ServiceRequestContext) async throws -> PickupSagaView {
        _ = try context.requireIdentity(.admin)
        let id = try context.parameters.require("id", as: UUID.self)
        return try await database.withConnection { connection in
            _ = try await store.order(id, on: connection)
            guard let saga = try await sagas.view(of: id, on: connection) else {
                throw APIError.notFound("order \(id) has not been picked up, so it has no pickup saga")
            }
            return saga
        }
    }

    func transition(_ action: OrderAction, _ request: Request, _ context: ServiceRequestContext) async throws
        -> Response
    {
        let identity = try context.requireIdentity()
        let id = try context.parameters.require("id", as: UUID.self)
        let body = try await request.collectBody(upTo: 16 * 1024)
        var reason: String?
        if action == .cancel, body.readableBytes > 0 {
            reason = try ContractRequestDecoder.decode(CancelOrder.self, from: Data(buffer: body)).reason
                .map { try Validate.text($0, "reason", maximum: 500) }
        }
        let idempotency = try IdempotentRequest(request: request, body: body, userId: identity.userId)
        let actor = OrderActor(id: identity.userId, role: identity.role)
        let (answer, replayed) = try await workflow.apply(
            action, to: id, by: actor, reason: reason, answering: idempotency, in: database)
        return IdempotentRequest.response(status: answer.status, body: answer.body, replayed: replayed)
    }

    // MARK: Proof of delivery

    struct ProofPhotoUploaded: Codable, Sendable {
        var orderId: String
        var proofPhoto: ProofPhotoView
    }

    /// The assigned rider uploads a JPEG or PNG (raw body, checked by its bytes, at most `PROOF_PHOTO_MAX_BYTES`).
    func uploadProofPhoto(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let id = try context.parameters.require("id", as: UUID.self)
        let actor = OrderActor(id: identity.userId, role: identity.role)
        // Who may upload is checked before up to PROOF_PHOTO_MAX_BYTES are read (and again in the transaction).
        let order = try await database.withConnection { try await store.order(id, on: $0) }
        _ = try OrderRules.apply(.uploadProofPhoto, to: order.snapshot, by: actor)
        let bytes = try await request.collectBody(upTo: settings.proofPhotoMaxBytes)
        guard let contentType = ImageKind.detect(bytes) else {
            throw APIError(
                .unsupportedMediaType, code: .unsupportedMediaType,
                message: "the proof photo must be a JPEG or PNG image (send its bytes as the request body)"
            )
        }
        let idempotency = try IdempotentRequest(request: request, body: bytes, userId: identity.userId)
        return try await database.idempotentTransaction(idempotency, status: .created) { connection in
            // Locked, so that a reassignment waits for the upload, or the upload sees it.
            let current = try await store.order(id, forUpdate: true, on: connection)
            _ = try OrderRules.apply(.uploadProofPhoto, to: current.snapshot, by: actor)
            try await store.insertProofPhoto(
                orderId: id, contentType: contentType, bytes: bytes, riderId: identity.userId, on: connection)
            let order = try await store.order(id, on: connection)
            guard let photo = order.proofPhoto else {
                throw APIError(.internalServerError, code: .internalError, message: "photo not stored")
            }
            return ProofPhotoUploaded(orderId: order.id, proofPhoto: photo)
        }
    }
}

/// Image formats accepted as proof photos, recognised by their first bytes.
package enum ImageKind {
    /// `image/jpeg` or `image/png` if the bytes start like one, else nil.
    package static func detect(_ bytes: ByteBuffer) -> String? {
        guard let head = bytes.getBytes(at: bytes.readerIndex, length: min(8, bytes.readableBytes)) else { return nil }
        if head.count >= 3, head[0] == 0xFF, head[1] == 0xD8, head[2] == 0xFF { return "image/jpeg" }
        if head == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] { return "image/png" }
        return nil
    }
}
