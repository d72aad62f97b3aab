import OrderService
import TestSupport
import Testing

@Suite("OrderService starts for real", .timeLimit(.minutes(2)))
struct OrderServiceStartupTests {
    @Test("connects to Postgres and the broker, migrates its schema, serves /health, /ready and /metrics")
    func starts() async throws {
        try await expectServiceStarts(OrderService.self)
    }
}
