import Logging
import Synchronization
import Testing

@testable import Realtime

/// A session holds no task: its close is handed to `EngineServer.run`, which tells the handler. Shutdown must not
/// lose one, whichever side closes a session first.
@Suite("Engine.IO shutdown")
struct EngineShutdownTests {
    final class Recorder: EngineHandler, Sendable {
        let openedCount = Atomic<Int>(0)
        let closedCount = Atomic<Int>(0)

        func opened(_ session: EngineSession) { openedCount.add(1, ordering: .relaxed) }
        func receive(_ message: EngineMessage, from session: EngineSession) throws(EngineProtocolError) {}
        func closed(_ session: EngineSession, reason: EngineCloseReason) async {
            closedCount.add(1, ordering: .relaxed)
        }
    }

    @Test("every session opened is closed once for the handler, those closing while shutdown runs too")
    func everySessionHandedOver() async throws {
        let recorder = Recorder()
        let server = EngineServer(
            configuration: EngineConfiguration(), handler: recorder, logger: Logger(label: "test"))
        let count = 2_000
        var sessions: [EngineSession] = []
        for _ in 0..<count {
            sessions.append(try server.openSession(query: [:], headers: [:], peer: nil, transport: .polling).get())
        }
        let running = Task { try await server.run() }
        // Transports closing on another thread while shutdown closes every session.
        let closer = Task.detached { [sessions] in
            for session in sessions.reversed() { session.close(.transportClose) }
        }
        server.shutDown()
        await closer.value
        try await running.value
        #expect(recorder.openedCount.load(ordering: .relaxed) == count)
        #expect(recorder.closedCount.load(ordering: .relaxed) == count)
        #expect(server.sessionCount == 0)
        guard
            case .failure(.shuttingDown) = server.openSession(query: [:], headers: [:], peer: nil, transport: .polling)
        else {
            Issue.record("a session opened after shutdown")
            return
        }
    }
}
