import NotificationService
import TestSupport
import Testing

@Suite("NotificationService starts for real", .timeLimit(.minutes(2)))
struct NotificationServiceStartupTests {
    @Test("connects to Postgres and the broker, migrates its schema, serves /health, /ready and /metrics")
    func starts() async throws {
        try await expectServiceStarts(NotificationService.self)
    }
}
