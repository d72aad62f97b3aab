import NotificationService
import ServiceKit
import TestSupport
import Testing

@Suite("NotificationService starts for real", .timeLimit(.minutes(2)))
struct NotificationServiceStartupTests {
    @Test("connects to Postgres and the broker, migrates its schema, serves /health, /ready and /metrics")
    func starts() async throws {
        try await expectServiceStarts(NotificationService.self, extra: ["PUSH_LOG_PROVIDER": "true"])
    }

    @Test("without push credentials it refuses to start unless the log provider is chosen explicitly")
    func refusesToOnlyLogSilently() throws {
        #expect(throws: ConfigurationError.self) { try NotificationSettings(environment: ServiceEnvironment([:])) }
        let apnsOnly = ServiceEnvironment([
            "APNS_KEY_FILE": "/keys/apns.p8", "APNS_KEY_ID": "K", "APNS_TEAM_ID": "T", "APNS_TOPIC": "com.example",
        ])
        #expect(throws: ConfigurationError.self) { try NotificationSettings(environment: apnsOnly) }
        let logOnly = try NotificationSettings(environment: ServiceEnvironment(["PUSH_LOG_PROVIDER": "true"]))
        #expect(logOnly.allowsLogProvider)
    }
}
