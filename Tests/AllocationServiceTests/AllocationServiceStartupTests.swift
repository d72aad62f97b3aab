import AllocationService
import TestSupport
import Testing

@Suite("AllocationService starts for real", .timeLimit(.minutes(2)))
struct AllocationServiceStartupTests {
    @Test("connects to Postgres and the broker, migrates its schema, serves /health, /ready and /metrics")
    func starts() async throws {
        try await expectServiceStarts(AllocationService.self)
    }
}
