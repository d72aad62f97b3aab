import ChatService
import Contracts
import Foundation
import Realtime
import RealtimePlatform
import ServiceKit
import TestSupport
import Testing

@Suite("Closed chats are kept CHAT_CLOSED_RETENTION_DAYS, on a manual clock")
struct ChatRetentionTests {
    static func event(_ payload: some EventPayload, of orderId: String) throws -> DecodedEvent {
        try EventCatalog.decode(
            ContractCoding.encode(EventEnvelope(aggregateId: orderId, occurredAt: Date(), payload: payload)))
    }

    @Test("a closed chat's messages are deleted once the retention passed, not a second before; open chats never")
    func purge() async throws {
        let schema = uniqueName("chat")
        let migrations = [try MigrationSet.platform(), try ChatService.migrations()]
        try await withTestDatabase(schema: schema, migrations: migrations) { database in
            let clock = ManualClock()
            let settings = try ChatSettings(environment: ServiceEnvironment(["CHAT_CLOSED_RETENTION_DAYS": "30"]))
            let logger = TestInfrastructure.logger("chat-retention")
            let realtime = PostgresRealtimeStore(
                database: database, retention: .seconds(240), now: clock.now, logger: logger)
            let namespace = SocketIOServer(store: realtime, logger: logger).namespace("/chat")
            let workflow = ChatWorkflow(
                database: database, store: ChatStore(logger: logger), outbox: Outbox(schema: schema, now: clock.now),
                emits: RealtimeEmitter(namespace: namespace, store: realtime), settings: settings, now: clock.now,
                logger: logger)
            let customer = Identity(userId: uniqueName("customer"), role: .customer, name: "Asha")
            let rider = PersonRef(id: uniqueName("rider"), name: "Ravi")
            let address = Address(line1: "4 Lake View", area: "Koramangala", lat: 12.93, lng: 77.62)
            let vendor = VendorRef(id: "vendor-1", name: "Spice Route", address: address)
            var orders: [String] = []
            for _ in 0..<2 {
                let orderId = UUID().uuidString.lowercased()
                orders.append(orderId)
                try await database.transaction { connection in
                    try await workflow.project(
                        try Self.event(
                            OrderCreated(
                                orderId: orderId, customerId: customer.userId, vendor: vendor,
                                deliveryAddress: address, paymentMode: .prepaid, totalAmount: 10,
                                requiresPhotoProof: false), of: orderId), on: connection)
                    try await workflow.project(
                        try Self.event(
                            RiderAssigned(
                                orderId: orderId, customerId: customer.userId, vendorId: vendor.id, offerId: nil,
                                rider: rider), of: orderId), on: connection)
                }
                _ = try await workflow.send(
                    orderId: orderId, identity: customer, clientMessageId: "c-1", text: "The gate code is 4321",
                    quickReplyId: nil)
            }
            let (closed, open) = (orders[0], orders[1])
            try await database.transaction {
                try await workflow.project(
                    try Self.event(
                        OrderDelivered(
                            orderId: closed, customerId: customer.userId, vendorId: vendor.id, riderId: rider.id,
                            deliveredAt: clock.now()), of: closed), on: $0)
            }
            #expect(try await workflow.history(orderId: closed, identity: customer, before: nil, limit: 100).count == 2)

            clock.advance(by: .seconds(30 * 86_400 - 1))
            #expect(try await workflow.purgeClosedChats() == 0)
            clock.advance(by: .seconds(2))
            #expect(try await workflow.purgeClosedChats() == 1)
            #expect(try await workflow.purgeClosedChats() == 0, "a purged chat is not purged again")
            #expect(try await workflow.history(orderId: closed, identity: customer, before: nil, limit: 100).isEmpty)
            let kept = try await workflow.history(orderId: open, identity: customer, before: nil, limit: 100)
            #expect(kept.map(\.text) == ["The gate code is 4321"])
        }
    }
}
