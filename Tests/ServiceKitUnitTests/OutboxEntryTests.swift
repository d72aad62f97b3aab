import Contracts
import Foundation
import ServiceKit
import Testing

@Suite("Outbox entries")
struct OutboxEntryTests {
    @Test("an envelope the outbox makes is stamped by its clock, not the machine's")
    func stampedByTheClock() throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_000_000_000.125))
        let outbox = Outbox(schema: "orders", now: clock.now)
        clock.advance(by: .seconds(90))
        let entry = try outbox.entry(
            OrderAccepted(orderId: "order-1", customerId: "customer-1", vendorId: "vendor-1"), aggregateId: "order-1",
            key: "key-1")
        let envelope = try ContractCoding.decode(EventEnvelope<OrderAccepted>.self, from: Data(entry.payload.utf8))
        #expect(envelope.occurredAt == Date(timeIntervalSince1970: 1_000_000_090.125))
        #expect(entry.key == "key-1" && entry.topic == Topic.ordersEvents.rawValue && entry.type == "OrderAccepted")
    }
}
