import Foundation
import Realtime
import Testing

@Suite("Connection state recovery: what a server holds and replays")
struct RecoveryLedgerTests {
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    func ledger(window: Duration = .seconds(120), bufferLimit: Int = 1 << 20) -> RecoveryLedger {
        var settings = SocketIORecoverySettings()
        settings.window = window
        settings.bufferLimit = bufferLimit
        return RecoveryLedger(settings: settings)
    }

    func emit(
        _ text: String, to rooms: [String], except: [String] = [], latestKey: String? = nil, dedupeKey: String? = nil
    )
        -> RealtimeBroadcast
    {
        RealtimeBroadcast(
            rooms: rooms, except: except, packet: #"2/chat,["message","\#(text)"]"#, latestKey: latestKey,
            dedupeKey: dedupeKey)
    }

    func session(
        _ state: RecoverableSession.State, rooms: [String] = ["s1", "order:1"], since: Int64 = 0,
        lastSent: Int64? = nil, disconnectedAt: Int64? = nil, generation: Int = 0
    ) -> RecoverableSession {
        RecoverableSession(
            pid: "p1", sid: "s1", userId: "u1", rooms: rooms, state: state, since: since, lastSent: lastSent,
            disconnectedAt: disconnectedAt, generation: generation)
    }

    func refusal(_ result: Result<RecoveryLedger.Restoration, RecoveryRefusal>) -> RecoveryRefusal? {
        guard case .failure(let refusal) = result else { return nil }
        return refusal
    }

    func texts(_ restoration: RecoveryLedger.Restoration?) -> [String] {
        (restoration?.missed ?? []).map { entry in
            guard case .text(let text) = entry.packets[0].payload else { return "" }
            return text
        }
    }

    @Test(
        "the emits after the client's offset, in its rooms and not excluding it, come back in order with their offsets")
    func replaysMissed() {
        var ledger = ledger()
        _ = ledger.apply(session(.connected), namespace: "/chat", origin: "a", at: start, offset: 0, now: start)
        for (offset, broadcast) in [
            (1, emit("one", to: ["order:1"])), (2, emit("elsewhere", to: ["order:2"])),
            (3, emit("two", to: ["order:1"])), (4, emit("not for the sender", to: ["order:1"], except: ["s1"])),
            (5, emit("three", to: ["u:1", "s1"])),
        ] {
            _ = ledger.apply(
                broadcast, namespace: "/chat", at: start, offset: Int64(offset), withOffset: true, now: start)
        }
        _ = ledger.apply(
            session(.disconnected, lastSent: 5, disconnectedAt: 5), namespace: "/chat", origin: "a", at: start,
            offset: 6, now: start)
        let restoration = try? ledger.restoration(pid: "p1", namespace: "/chat", userId: "u1", offset: 1, now: start)
            .get()
        #expect(texts(restoration) == [#"2/chat,["message","two","3"]"#, #"2/chat,["message","three","5"]"#])
        #expect(restoration?.session.sid == "s1")
    }

    @Test("a client that received nothing yet recovers from where its socket connected")
    func noOffset() {
        var ledger = ledger()
        _ = ledger.apply(
            emit("before it connected", to: ["order:1"]), namespace: "/chat", at: start, offset: 0, withOffset: true,
            now: start)
        _ = ledger.apply(
            session(.connected, since: 0), namespace: "/chat", origin: "a", at: start, offset: 1, now: start)
        _ = ledger.apply(
            emit("missed", to: ["order:1"]), namespace: "/chat", at: start, offset: 2, withOffset: true, now: start)
        let restoration = try? ledger.restoration(pid: "p1", namespace: "/chat", userId: "u1", offset: nil, now: start)
            .get()
        #expect(texts(restoration) == [#"2/chat,["message","missed","2"]"#])
    }

    @Test("only the latest emit of a latestKey is replayed")
    func latestOnly() {
        var ledger = ledger()
        _ = ledger.apply(session(.connected), namespace: "/chat", origin: "a", at: start, offset: 0, now: start)
        for offset in 1...3 {
            _ = ledger.apply(
                emit("position \(offset)", to: ["order:1"], latestKey: "job-1"), namespace: "/chat", at: start,
                offset: Int64(offset), withOffset: true, now: start)
        }
        let restoration = try? ledger.restoration(pid: "p1", namespace: "/chat", userId: "u1", offset: 0, now: start)
            .get()
        #expect(texts(restoration) == [#"2/chat,["message","position 3","3"]"#])
    }

    @Test("an emit whose dedupeKey was applied already is dropped")
    func dedupe() {
        var ledger = ledger()
        let first = ledger.apply(
            emit("update", to: ["r"], dedupeKey: "event-1"), namespace: "/chat", at: start, offset: 0, withOffset: true,
            now: start)
        let second = ledger.apply(
            emit("update", to: ["r"], dedupeKey: "event-1"), namespace: "/chat", at: start, offset: 1, withOffset: true,
            now: start)
        #expect(first != nil)
        #expect(second == nil)
    }

    @Test("a session dropped longer ago than the window is not recovered; within it, it is")
    func window() {
        var ledger = ledger(window: .seconds(120))
        _ = ledger.apply(session(.connected), namespace: "/chat", origin: "a", at: start, offset: 0, now: start)
        _ = ledger.apply(
            session(.disconnected, disconnectedAt: 0), namespace: "/chat", origin: "a", at: start, offset: 1, now: start
        )
        #expect(
            refusal(ledger.restoration(pid: "p1", namespace: "/chat", userId: "u1", offset: nil, now: start + 119))
                == nil)
        #expect(
            refusal(ledger.restoration(pid: "p1", namespace: "/chat", userId: "u1", offset: nil, now: start + 121))
                == .windowPassed)
    }

    @Test("when an emit the client may have missed is no longer held it is not recovered, unless it had everything")
    func evicted() {
        /// Ten emits, of which the held ones (about two fit in 300 bytes) are the last; the socket got `sentToIt`.
        func ledgerAfterTenEmits(roomOf: (Int) -> String, lastSent: Int64) -> RecoveryLedger {
            var ledger = ledger(bufferLimit: 300)
            _ = ledger.apply(
                session(.connected, since: -1), namespace: "/chat", origin: "a", at: start, offset: 0, now: start)
            for offset in 1...10 {
                _ = ledger.apply(
                    emit("message \(offset) \(String(repeating: "x", count: 40))", to: [roomOf(offset)]),
                    namespace: "/chat", at: start, offset: Int64(offset), withOffset: true, now: start)
            }
            _ = ledger.apply(
                session(.disconnected, lastSent: lastSent, disconnectedAt: 10), namespace: "/chat", origin: "a",
                at: start, offset: 11, now: start)
            return ledger
        }
        // Every emit was for the client, which last received offset 2: 3 to 8 are gone.
        let busy = ledgerAfterTenEmits(roomOf: { _ in "order:1" }, lastSent: 10)
        #expect(
            refusal(busy.restoration(pid: "p1", namespace: "/chat", userId: "u1", offset: 2, now: start))
                == .emitsNoLongerHeld)
        // Only 1 and 2 were for it and it received both: an idle client whose offset is older than anything held.
        let idle = ledgerAfterTenEmits(roomOf: { $0 <= 2 ? "order:1" : "order:2" }, lastSent: 2)
        let restoration = try? idle.restoration(pid: "p1", namespace: "/chat", userId: "u1", offset: 2, now: start)
            .get()
        #expect(restoration?.missed.isEmpty == true)
    }

    @Test("another user or namespace cannot take the session")
    func ownership() {
        var ledger = ledger()
        _ = ledger.apply(session(.connected), namespace: "/chat", origin: "a", at: start, offset: 0, now: start)
        #expect(
            refusal(ledger.restoration(pid: "p1", namespace: "/chat", userId: "u2", offset: nil, now: start))
                == .anotherUser)
        #expect(
            refusal(ledger.restoration(pid: "p1", namespace: "/rider", userId: "u1", offset: nil, now: start))
                == .unknownSession)
        #expect(
            refusal(ledger.restoration(pid: "p2", namespace: "/chat", userId: "u1", offset: nil, now: start))
                == .unknownSession)
    }

    @Test("restored elsewhere: the old instance learns it must drop its socket, and late records change nothing")
    func movedAway() {
        var ledger = ledger()
        _ = ledger.apply(session(.connected), namespace: "/chat", origin: "a", at: start, offset: 0, now: start)
        // Restored on b: a new generation.
        let moved = ledger.apply(
            session(.connected, generation: 1), namespace: "/chat", origin: "b", at: start, offset: 1, now: start)
        #expect(moved)
        // Instance a notices its old socket drop late: an older generation, ignored; so is another instance's record
        // of the same generation (two restores racing).
        let stale = ledger.apply(session(.ended), namespace: "/chat", origin: "a", at: start, offset: 2, now: start)
        let racing = ledger.apply(
            session(.connected, generation: 1), namespace: "/chat", origin: "c", at: start, offset: 3, now: start)
        #expect(!stale && !racing)
        #expect(
            refusal(ledger.restoration(pid: "p1", namespace: "/chat", userId: "u1", offset: nil, now: start)) == nil)
        // Ended by its owner: gone.
        _ = ledger.apply(
            session(.ended, generation: 1), namespace: "/chat", origin: "b", at: start, offset: 4, now: start)
        #expect(
            refusal(ledger.restoration(pid: "p1", namespace: "/chat", userId: "u1", offset: nil, now: start))
                == .unknownSession)
    }

    @Test("a client that missed more than a restore sends connects afresh")
    func tooMuchMissed() {
        var settings = SocketIORecoverySettings()
        settings.replayLimit = 1000
        var ledger = RecoveryLedger(settings: settings)
        _ = ledger.apply(session(.connected), namespace: "/chat", origin: "a", at: start, offset: 0, now: start)
        for offset in 1...20 {
            _ = ledger.apply(
                emit("message \(offset) \(String(repeating: "x", count: 40))", to: ["order:1"]), namespace: "/chat",
                at: start, offset: Int64(offset), withOffset: true, now: start)
        }
        #expect(
            refusal(ledger.restoration(pid: "p1", namespace: "/chat", userId: "u1", offset: 0, now: start))
                == .tooMuchMissed)
        #expect(refusal(ledger.restoration(pid: "p1", namespace: "/chat", userId: "u1", offset: 15, now: start)) == nil)
    }

    @Test("an offset the log has not reached is refused")
    func futureOffset() {
        var ledger = ledger()
        _ = ledger.apply(session(.connected), namespace: "/chat", origin: "a", at: start, offset: 0, now: start)
        #expect(
            refusal(ledger.restoration(pid: "p1", namespace: "/chat", userId: "u1", offset: 99, now: start))
                == .offsetAhead)
    }
}
