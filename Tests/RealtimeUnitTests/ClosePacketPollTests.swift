import Logging
import Testing

@testable import Realtime

/// The poll a client sends alongside its close packet is answered with one noop, whichever way it reaches the
/// session: looked up before the closed session was removed, or after (the server then remembers the sid).
@Suite("Engine.IO close packet and the poll sent with it")
struct ClosePacketPollTests {
    /// A server (not listening) and a polling session on it that the client closed with no poll waiting.
    static func closedSession() throws -> (EngineServer, EngineSession) {
        let server = EngineServer(
            configuration: EngineConfiguration(), handler: IdleEngineHandler(), logger: Logger(label: "test"))
        let session = try server.openSession(query: [:], headers: [:], peer: nil, transport: .polling).get()
        session.close(.clientClose)
        return (server, session)
    }

    static func isNoop(_ result: PollResult) -> Bool {
        if case .packets(let packets) = result, packets.count == 1, packets[0].type == .noop { return true }
        return false
    }

    @Test("a poll that found the session before its removal, and polls after it: one noop in all")
    func pollRacingTheRemoval() async throws {
        let (server, session) = try Self.closedSession()
        server.remove(session)
        #expect(Self.isNoop(await session.poll()))
        #expect(!server.takeOwedNoop(sid: session.id))
    }

    @Test("a poll after the removal gets the noop; the session, reached later, answers gone")
    func pollAfterTheRemoval() async throws {
        let (server, session) = try Self.closedSession()
        server.remove(session)
        #expect(server.takeOwedNoop(sid: session.id))
        #expect(!Self.isNoop(await session.poll()))
        #expect(!server.takeOwedNoop(sid: session.id))
    }
}
