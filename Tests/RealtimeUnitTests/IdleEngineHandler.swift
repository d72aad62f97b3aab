@testable import Realtime

/// An Engine.IO handler that does nothing: for tests of the engine's own bookkeeping.
struct IdleEngineHandler: EngineHandler {
    func opened(_ session: EngineSession) {}
    func receive(_ message: EngineMessage, from session: EngineSession) throws(EngineProtocolError) {}
    func closed(_ session: EngineSession, reason: EngineCloseReason) async {}
}
