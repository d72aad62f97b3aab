import LocationService
import TestSupport
import Testing

@Suite("LocationService starts for real", .timeLimit(.minutes(2)))
struct LocationServiceStartupTests {
    @Test("connects to Postgres and the broker, migrates its schema, serves /health, /ready and /metrics")
    func starts() async throws {
        try await expectServiceStarts(LocationService.self)
    }
}
