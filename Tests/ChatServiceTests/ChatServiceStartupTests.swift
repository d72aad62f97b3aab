import ChatService
import TestSupport
import Testing

@Suite("ChatService starts for real", .timeLimit(.minutes(2)))
struct ChatServiceStartupTests {
    @Test("connects to Postgres and the broker, migrates its schema, serves /health, /ready and /metrics")
    func starts() async throws {
        try await expectServiceStarts(ChatService.self)
    }
}
