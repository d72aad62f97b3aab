import Foundation
import Hummingbird
import Realtime
import RealtimeTesting
import Synchronization
import TestSupport
import Testing

/// A room's feed opens by reading where the room's stream stands, while the store's notices travel on a connection
/// of their own: an emit that committed just before that read can be noticed after its answer.
@Suite("Late notices", .timeLimit(.minutes(1)))
struct LateNoticeTests {
    /// An in-memory store whose notices reach the server `delay` late, in order (as a busy LISTEN connection's can),
    /// and whose positions reads wait until the test lets them go.
    final class LateNoticeStore: RealtimeStore {
        let base = InMemoryRealtimeStore()
        let delay: Duration
        /// A positions read began.
        let positionsAsked = AsyncQueue<[String]>()
        /// Lets one positions read go on.
        let positionsAllowed = AsyncQueue<Void>()
        /// The rooms of each session written.
        let saved = AsyncQueue<Set<String>>()
        /// Where the server following the store gets its notices (``tell(_:)``).
        private let followers = Mutex<[AsyncStream<[RealtimeNotice]>.Continuation]>([])

        init(delay: Duration) { self.delay = delay }

        func append(_ emit: RoomEmit) async throws { try await base.append(emit) }

        func positions(namespace: String, rooms: [String]) async throws -> [String: StreamPosition] {
            positionsAsked.push(rooms)
            _ = try await positionsAllowed.next(timeout: .seconds(20))
            return try await base.positions(namespace: namespace, rooms: rooms)
        }

        func mark(_ id: String) async throws { try await base.mark(id) }

        func emits(namespace: String, room: String, after position: StreamPosition, byteLimit: Int) async throws
            -> StreamRead
        {
            try await base.emits(namespace: namespace, room: room, after: position, byteLimit: byteLimit)
        }

        func latest(namespace: String, room: String) async throws -> [String: String] {
            try await base.latest(namespace: namespace, room: room)
        }

        func catchUp(namespace: String, after positions: [String: StreamPosition], byteLimit: Int) async throws
            -> [String: RoomCatchUp]
        {
            try await base.catchUp(namespace: namespace, after: positions, byteLimit: byteLimit)
        }

        func save(_ session: StoredSession) async throws {
            try await base.save(session)
            saved.push(Set(session.rooms.keys))
        }

        func touch(pids: [String], owner: String, at now: Date) async throws {
            try await base.touch(pids: pids, owner: owner, at: now)
        }

        func end(pid: String, generation: Int) async throws { try await base.end(pid: pid, generation: generation) }

        func session(pid: String) async throws -> StoredSession? { try await base.session(pid: pid) }

        func claim(_ session: StoredSession) async throws -> Bool { try await base.claim(session) }

        func follow(
            ready: @escaping @Sendable () -> Void, _ receive: @escaping @Sendable ([RealtimeNotice]) -> Void
        ) async throws {
            let (late, lateInput) = AsyncStream.makeStream(of: [RealtimeNotice].self)
            followers.withLock { $0.append(lateInput) }
            let delay = self.delay
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask {
                    for await notices in late {
                        try await Task.sleep(for: delay)
                        receive(notices)
                    }
                }
                try await base.follow(ready: ready) { lateInput.yield($0) }
                lateInput.finish()
            }
        }

        /// Tells the servers following the store `notices`, in order with the store's own (as a change that
        /// commits would); how many servers follow it.
        func tell(_ notices: [RealtimeNotice]) -> Int {
            let following = followers.withLock { $0 }
            for follower in following { follower.yield(notices) }
            return following.count
        }
    }

    static func application(store: LateNoticeStore, port: Int, recovery: Bool = false) -> (
        some ApplicationProtocol, RealtimeServer, SocketIONamespace
    ) {
        let logger = TestInfrastructure.logger("late-notices")
        var configuration = SocketIOConfiguration()
        if recovery { configuration.recovery = SocketIORecoverySettings() }
        let realtime = RealtimeServer(
            configuration: EngineConfiguration(), socketIO: configuration, store: store, logger: logger)
        let namespace = realtime.namespace("/late")
        namespace.on("join", [String: String].self) { socket, request in
            socket.join(request["room"] ?? "room")
            return ["joined": request["room"] ?? "room"]
        }
        namespace.on("leave", [String: String].self) { socket, request in
            socket.leave(request["room"] ?? "room")
            return ["left": request["room"] ?? "room"]
        }
        let router = Router()
        realtime.addRoutes(to: router)
        let app = Application(
            router: router, server: RealtimeServerBuilder.http1WithWebSockets([realtime.engine]),
            configuration: .init(address: .hostname("127.0.0.1", port: port)), logger: logger)
        return (app, realtime, namespace)
    }

    @Test(
        "an emit committed just before a joining room's position was read reaches the socket though its notice comes after"
    )
    func emitNoticedAfterTheFeedOpened() async throws {
        let port = TestPorts.allocate()
        let store = LateNoticeStore(delay: .milliseconds(300))
        let (app, realtime, namespace) = Self.application(store: store, port: port)
        try await withRunningApplication(app, port: port, services: [realtime]) {
            try await withTestWebSocket("ws://127.0.0.1:\(port)/socket.io/?EIO=4&transport=websocket") { socket in
                _ = try await socket.next()
                socket.send("40/late,")
                #expect(try await socket.next().textContent?.hasPrefix("40/late,") == true)
                socket.send(#"42/late,1["join",{}]"#)
                #expect(try await socket.next() == .text(#"43/late,1[{"joined":"room"}]"#))
                // The socket is in the room; its feed asks where the stream stands. The emit commits before that
                // read, and its notice arrives after the answer.
                #expect(try await store.positionsAsked.next() == ["room"])
                try await namespace.emit("news", ["n": 1], toRoom: "room")
                store.positionsAllowed.push(())
                #expect(try await socket.nextSkippingPings(timeout: .seconds(5)) == .text(#"42/late,["news",{"n":1}]"#))
                try await namespace.emit("news", ["n": 2], toRoom: "room")
                #expect(try await socket.nextSkippingPings(timeout: .seconds(5)) == .text(#"42/late,["news",{"n":2}]"#))
            }
        }
    }

    @Test("a session written while one of its rooms' feeds opens is written once the socket left that room")
    func sessionWaitingForAFeedThatCloses() async throws {
        let port = TestPorts.allocate()
        let store = LateNoticeStore(delay: .zero)
        let (app, realtime, _) = Self.application(store: store, port: port, recovery: true)
        try await withRunningApplication(app, port: port, services: [realtime]) {
            try await withTestWebSocket("ws://127.0.0.1:\(port)/socket.io/?EIO=4&transport=websocket") { socket in
                _ = try await socket.next()
                socket.send("40/late,")
                let connected = try #require(try await socket.next().textContent)
                #expect(connected.hasPrefix("40/late,"))
                let ownRoom = try #require(try await store.saved.next())
                // The session with the new room waits for the room's feed to open (its position is what a restore
                // starts from), and the join's answer waits for the session (5 s at most). The feed is never let
                // open: it closes when the socket leaves the room, and the session is written without it.
                socket.send(#"42/late,1["join",{"room":"slow"}]"#)
                #expect(try await store.positionsAsked.next() == ["slow"])
                socket.send(#"42/late,2["leave",{"room":"slow"}]"#)
                var answers: Set<String> = []
                for _ in 0..<2 {
                    answers.insert(try await socket.nextSkippingPings(timeout: .seconds(8)).textContent ?? "")
                }
                #expect(answers == [#"43/late,1[{"joined":"slow"}]"#, #"43/late,2[{"left":"slow"}]"#])
                #expect(try await store.saved.next(timeout: .seconds(5)) == ownRoom)
            }
            store.positionsAllowed.push(())
        }
    }

    /// A socket's Socket.IO id, from its CONNECT answer (`40/late,{"sid":"…"}`).
    static func sid(_ connected: String?) throws -> String {
        let body = try #require(connected?.dropFirst("40/late,".count))
        return try JSONDecoder().decode([String: String].self, from: Data(body.utf8))["sid"] ?? ""
    }

    @Test(
        "a leave told while the room's feed opens waits for the emit told before it, and spares a socket that joined again"
    )
    func leaveWhileTheFeedOpens() async throws {
        let port = TestPorts.allocate()
        let store = LateNoticeStore(delay: .zero)
        let (app, realtime, namespace) = Self.application(store: store, port: port)
        let url = "ws://127.0.0.1:\(port)/socket.io/?EIO=4&transport=websocket"
        try await withRunningApplication(app, port: port, services: [realtime]) {
            try await withTestWebSocket(url) { staying in
                try await withTestWebSocket(url) { leaving in
                    var sids: [String] = []
                    for socket in [staying, leaving] {
                        _ = try await socket.next()
                        socket.send("40/late,")
                        sids.append(try Self.sid(try await socket.next().textContent))
                    }
                    // Both are in the room "riders", whose sockets the leave takes out of "room".
                    for (index, socket) in [staying, leaving].enumerated() {
                        socket.send(#"42/late,1["join",{"room":"riders"}]"#)
                        #expect(try await socket.nextSkippingPings() == .text(#"43/late,1[{"joined":"riders"}]"#))
                        if index == 0 {
                            #expect(try await store.positionsAsked.next() == ["riders"])
                            store.positionsAllowed.push(())
                        }
                        socket.send(#"42/late,2["join",{"room":"room"}]"#)
                        #expect(try await socket.nextSkippingPings() == .text(#"43/late,2[{"joined":"room"}]"#))
                    }
                    // The feed of "room" opens (its read waits): an emit and then the leave are told meanwhile.
                    #expect(try await store.positionsAsked.next() == ["room"])
                    try await namespace.emit("news", ["n": 1], toRoom: "room")
                    #expect(store.tell([.leave(namespace: "/late", socketsIn: "riders", room: "room")]) == 1)
                    try await namespace.noticesCaughtUp()
                    #expect(namespace.sockets(in: "room").count == 2, "the leave waits for the emit told before it")
                    // One of them joins "room" again, decided after the leave's change: the leave spares it.
                    staying.send(#"42/late,3["join",{"room":"room"}]"#)
                    #expect(try await staying.nextSkippingPings() == .text(#"43/late,3[{"joined":"room"}]"#))
                    store.positionsAllowed.push(())
                    for socket in [staying, leaving] {
                        #expect(
                            try await socket.nextSkippingPings(timeout: .seconds(5))
                                == .text(#"42/late,["news",{"n":1}]"#))
                    }
                    try await namespace.emit("news", ["n": 2], toRoom: "room")
                    try await namespace.emit("done", ["n": 2], toRoom: sids[1])
                    #expect(
                        try await staying.nextSkippingPings(timeout: .seconds(5)) == .text(#"42/late,["news",{"n":2}]"#)
                    )
                    #expect(
                        try await leaving.nextSkippingPings(timeout: .seconds(5)) == .text(#"42/late,["done",{"n":2}]"#)
                    )
                    #expect(namespace.sockets(in: "room").map(\.id) == [sids[0]])
                }
            }
        }
    }
}
