import Foundation
import Hummingbird
import Logging
import PostgresNIO
import Realtime
import RealtimePlatform
import RealtimeTesting
import ServiceKit
import TestSupport
import Testing

/// The realtime store in Postgres: streams numbered per room and told as they commit, latest values, sessions
/// claimed once, trimming; and servers that lose the store's notices catching up.
@Suite("Postgres realtime store", .timeLimit(.minutes(2)))
struct PostgresRealtimeStoreTests {
    static func store(_ database: Database) -> PostgresRealtimeStore {
        PostgresRealtimeStore(
            database: database, retention: .seconds(240), now: .system,
            logger: TestInfrastructure.logger("realtime-store"))
    }

    /// Follows `store` for the duration of `body`, collecting its notices.
    static func following<Result: Sendable>(
        _ store: PostgresRealtimeStore, _ body: @Sendable (Locked<[RealtimeNotice]>) async throws -> Result
    ) async throws -> Result {
        let notices = Locked<[RealtimeNotice]>([])
        let ready = AsyncQueue<Void>()
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await store.follow(ready: { ready.push(()) }) { new in notices.withLock { $0 += new } }
            }
            defer { group.cancelAll() }
            _ = try await ready.next(timeout: .seconds(10))
            return try await body(notices)
        }
    }

    @Test("a notification's lines are read as notices; a packet keeps its tabs and any text, and bad lines are skipped")
    func noticeLines() {
        // No field holds a CR or newline: names are checked for them and packets are JSON with control characters
        // escaped, so lines split on the newline byte alone.
        let packet = "42[\"message\",{\"text\":\"caf\u{e9} \u{1F6F5}\tok\"}]"
        let payload = [
            "e\t/chat\torder-1\tab12cd34\t7\tsocket-9\t" + packet, "e\t/orders\tadmins\tab12cd34\t8\t\t",
            "e\t/orders\tadmins\tab12cd34\t9\t", "l\t/location\tjob-1\tposition\t42[\"p\t\"]", "m\tmark-1",
            "s\tpid-1\t3\tserver-2", "x\t/chat\tuser:u-1\torder:1", "x\t/chat\tuser:u-1", "e\tshort",
            "e\t/chat\troom\tepoch\tnot-a-number\t", "s\tpid\tx\towner", "",
            "?\tx",
        ].joined(separator: "\n")
        let position = { (offset: Int64) in StreamPosition(epoch: "ab12cd34", offset: offset) }
        #expect(
            PostgresRealtimeStore.notices(in: payload) == [
                .emit(
                    namespace: "/chat", room: "order-1", position: position(7),
                    packet: StreamEmit(
                        namespace: "/chat", room: "order-1", position: position(7), packet: packet, except: "socket-9")),
                .emit(
                    namespace: "/orders", room: "admins", position: position(8),
                    packet: StreamEmit(
                        namespace: "/orders", room: "admins", position: position(8), packet: "", except: nil)),
                .emit(namespace: "/orders", room: "admins", position: position(9), packet: nil),
                .latest(namespace: "/location", room: "job-1", key: "position", packet: "42[\"p\t\"]"),
                .mark("mark-1"),
                .sessionClaimed(pid: "pid-1", generation: 3, owner: "server-2"),
                .leave(namespace: "/chat", socketsIn: "user:u-1", room: "order:1"),
            ])
    }

    @Test("each room's emits are numbered on their own, committed with their transaction, and told as they commit")
    func numbering() async throws {
        try await withTestDatabase { database in
            let store = Self.store(database)
            try await Self.following(store) { notices in
                try await store.append(RoomEmit(namespace: "/chat", room: "order:1", packet: #"2/chat,["m",1]"#))
                try await store.append(RoomEmit(namespace: "/chat", room: "order:2", packet: #"2/chat,["m",2]"#))
                try await database.transaction { connection in
                    try await store.append(
                        RoomEmit(namespace: "/chat", room: "order:1", packet: #"2/chat,["m",3]"#, except: "s1"),
                        on: connection)
                }
                // Rolled back: never numbered, never told.
                struct Abandoned: Error {}
                _ = try? await database.transaction { connection in
                    try await store.append(
                        RoomEmit(namespace: "/chat", room: "order:1", packet: #"2/chat,["m",4]"#), on: connection)
                    throw Abandoned()
                }
                try await eventually(timeout: .seconds(5), "three notices") { notices.withLock { $0.count } >= 3 }
                let told = notices.withLock { $0 }
                let offsets = told.compactMap { notice -> String? in
                    guard case .emit(_, let room, let position, let packet) = notice else { return nil }
                    return "\(room)#\(position.offset):\(packet?.packet ?? "-"):\(packet?.except ?? "")"
                }
                #expect(
                    offsets == [
                        #"order:1#1:2/chat,["m",1]:"#, #"order:2#1:2/chat,["m",2]:"#, #"order:1#2:2/chat,["m",3]:s1"#,
                    ])
                let positions = try await store.positions(namespace: "/chat", rooms: ["order:1", "order:2", "none"])
                #expect(positions["order:1"]?.offset == 2)
                #expect(positions["none"] == .start)
                guard
                    case .emits(let emits, _) = try await store.emits(
                        namespace: "/chat", room: "order:1",
                        after: StreamPosition(epoch: positions["order:1"]?.epoch, offset: 1), byteLimit: 1 << 20)
                else { throw ProtocolMismatch("no emits") }
                #expect(emits.map(\.packet) == [#"2/chat,["m",3]"#])
                #expect(
                    try await store.emits(
                        namespace: "/chat", room: "order:1", after: StreamPosition(epoch: "another", offset: 1),
                        byteLimit: 1 << 20) == .unavailable(.anotherEpoch))
            }
        }
    }

    @Test(
        "emits are numbered in written order per room, contiguous under 16 writers to one room, told in order",
        arguments: [EmitNumbering.inPlace, .atCommit])
    func numberingUnderWriters(numbering: EmitNumbering) async throws {
        try await withTestDatabase { database in
            let store = Self.store(database)
            try await Self.following(store) { notices in
                // One transaction, three statements, rooms out of order: a's emits keep their order.
                try await database.transaction { connection in
                    try await store.append(
                        RoomEmit(namespace: "/o", room: "b", packet: "b1"), toRooms: ["b", "a"], numbering: numbering,
                        on: connection)
                    try await store.append(
                        RoomEmit(namespace: "/o", room: "a", packet: "a2"), toRooms: ["a"], numbering: numbering,
                        on: connection)
                    try await store.append(
                        RoomEmit(namespace: "/o", room: "a", packet: "a3"), toRooms: ["c", "a"], numbering: numbering,
                        on: connection)
                }
                // Sixteen writers, 20 transactions each, every one to the shared room and a room of its own.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for writer in 0..<16 {
                        group.addTask {
                            for index in 0..<20 {
                                try await database.transaction { connection in
                                    try await store.append(
                                        RoomEmit(namespace: "/o", room: "shared", packet: "w\(writer)-\(index)"),
                                        toRooms: ["shared", "w\(writer)"], numbering: numbering,
                                        on: connection)
                                }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                try await eventually(timeout: .seconds(10), "every notice") { notices.withLock { $0.count } >= 645 }
                var told: [String: [(Int64, String)]] = [:]
                for case .emit(_, let room, let position, let packet) in notices.withLock({ $0 }) {
                    told[room, default: []].append((position.offset, packet?.packet ?? "-"))
                }
                #expect(told["a"]?.map(\.1) == ["b1", "a2", "a3"])
                #expect(told["a"]?.map(\.0) == [1, 2, 3])
                #expect(told["b"]?.map(\.0) == [1] && told["c"]?.map(\.0) == [1])
                // The shared room: 1 to 320, each once, told in offset order; each writer's own emits in its order.
                #expect(told["shared"]?.map(\.0) == Array(1...320))
                for writer in 0..<16 {
                    let own = (told["shared"] ?? []).map(\.1).filter { $0.hasPrefix("w\(writer)-") }
                    #expect(own == (0..<20).map { "w\(writer)-\($0)" })
                }
                #expect(try await store.positions(namespace: "/o", rooms: ["shared"])["shared"]?.offset == 320)
                // Nothing is left staged.
                let staged = try await database.withConnection { connection in
                    var count = -1
                    let rows = try await connection.queryWhileOpen(
                        "SELECT count(*) FROM realtime_staged", logger: database.logger)
                    for try await found in rows.decode(Int.self) { count = found }
                    return count
                }
                #expect(staged == 0)
            }
        }
    }

    @Test("a packet too large for a notification is told without it and read from the store")
    func largePacket() async throws {
        try await withTestDatabase { database in
            let store = Self.store(database)
            try await Self.following(store) { notices in
                let packet = #"2/chat,["m",""# + String(repeating: "x", count: 20_000) + #""]"#
                try await store.append(RoomEmit(namespace: "/chat", room: "big", packet: packet))
                try await eventually(timeout: .seconds(5), "the notice") { notices.withLock { $0.count } == 1 }
                guard case .emit(_, _, let position, let emit) = notices.withLock({ $0[0] }) else {
                    throw ProtocolMismatch("not an emit")
                }
                #expect(emit == nil)
                guard
                    case .emits(let emits, _) = try await store.emits(
                        namespace: "/chat", room: "big", after: StreamPosition(epoch: position.epoch, offset: 0),
                        byteLimit: 1 << 20)
                else { throw ProtocolMismatch("no emits") }
                #expect(emits.first?.packet == packet)
            }
        }
    }

    @Test("latest values replace each other per key, and are told in batches")
    func latestValues() async throws {
        try await withTestDatabase { database in
            let store = Self.store(database)
            try await withRunningServices([store]) {
                try await Self.following(store) { notices in
                    for index in 0..<50 {
                        try await store.append(
                            RoomEmit(namespace: "/tracking", room: "job:1", packet: "p\(index)", latestKey: "location"))
                    }
                    try await eventually(timeout: .seconds(5), "the latest value") {
                        try await store.latest(namespace: "/tracking", room: "job:1") == ["location": "p49"]
                    }
                    try await eventually(timeout: .seconds(5), "its notice") {
                        notices.withLock { notices in
                            notices.contains(
                                .latest(namespace: "/tracking", room: "job:1", key: "location", packet: "p49"))
                        }
                    }
                }
            }
        }
    }

    @Test(
        "a room's closed latest values are neither stored, told nor replayed until reopened; one written while the close's transaction is open waits for it, then is dropped"
    )
    func closedLatestValues() async throws {
        try await withTestDatabase { database in
            let store = Self.store(database)
            try await withRunningServices([store]) {
                try await Self.following(store) { notices in
                    @Sendable func write(_ packet: String, room: String = "job:1") async throws {
                        try await store.append(
                            RoomEmit(namespace: "/tracking", room: room, packet: packet, latestKey: "location"))
                    }
                    /// Writes a value to another room and waits for its notice: every value written before is told
                    /// by then, or never (one writer, a batch at a time).
                    @Sendable func settle(_ mark: String) async throws {
                        try await write(mark, room: "job:marks")
                        try await eventually(timeout: .seconds(5), "the notice of \(mark)") {
                            notices.withLock {
                                $0.contains(
                                    .latest(namespace: "/tracking", room: "job:marks", key: "location", packet: mark))
                            }
                        }
                    }
                    func told(_ packet: String) -> Bool {
                        notices.withLock {
                            $0.contains(.latest(namespace: "/tracking", room: "job:1", key: "location", packet: packet))
                        }
                    }
                    try await write("before")
                    try await settle("m1")
                    #expect(told("before"))
                    try await database.transaction { connection in
                        try await store.closeLatest(
                            namespace: "/tracking", room: "job:1", keys: ["location", "eta"], on: connection)
                        try await write("racing")
                        // The write waits for this transaction's row lock (an instance that has not heard of the
                        // close yet). (pg_stat_activity is read once per transaction unless its snapshot is cleared.)
                        try await eventually(timeout: .seconds(5), "the write waiting for the close") {
                            let rows = try await connection.query(
                                """
                                SELECT count(*)::bigint FROM (SELECT pg_stat_clear_snapshot()) AS cleared,
                                    pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))
                                """, logger: database.logger)
                            var blocked: Int64 = 0
                            for try await count in rows.decode(Int64.self) { blocked = count }
                            return blocked > 0
                        }
                    }
                    try await write("after")
                    try await settle("m2")
                    #expect(!told("racing"))
                    #expect(!told("after"))
                    #expect(try await store.latest(namespace: "/tracking", room: "job:1") == [:])
                    let recovered = try await store.catchUp(
                        namespace: "/tracking", after: ["job:1": .start], byteLimit: 1 << 20)
                    #expect(recovered["job:1"]?.latest == [:])
                    try await database.transaction { connection in
                        try await store.reopenLatest(namespace: "/tracking", room: "job:1", on: connection)
                    }
                    try await write("reopened")
                    try await settle("m3")
                    #expect(told("reopened"))
                    #expect(try await store.latest(namespace: "/tracking", room: "job:1") == ["location": "reopened"])
                }
            }
        }
    }

    @Test("a mark comes back after the notice of every emit a positions read before it saw, while emits commit")
    func markAfterPositions() async throws {
        try await withTestDatabase { database in
            let store = Self.store(database)
            try await Self.following(store) { notices in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    // A namespace numbering in place and one numbering at commit, written without a pause.
                    for (namespace, numbering) in [("/in-place", EmitNumbering.inPlace), ("/at-commit", .atCommit)] {
                        group.addTask {
                            while !Task.isCancelled {
                                try await database.transaction { connection in
                                    try await store.append(
                                        RoomEmit(namespace: namespace, room: "busy", packet: #"2/m,["w"]"#),
                                        toRooms: ["busy"], numbering: numbering, on: connection)
                                }
                            }
                        }
                    }
                    var lastTops: [String: Int64] = [:]
                    // 40 rounds at least, and on until each writer committed 40 emits: on a loaded machine a writer
                    // can commit fewer than one a round (28 in 40 rounds in one CI run).
                    for round in 0..<2_000 {
                        if round >= 40, lastTops.values.allSatisfy({ $0 >= 40 }) { break }
                        for namespace in ["/in-place", "/at-commit"] {
                            let mark = "\(namespace)-\(round)"
                            let top = try #require(
                                try await store.positions(namespace: namespace, rooms: ["busy"])["busy"])
                            try await store.mark(mark)
                            try await eventually(timeout: .seconds(5), "mark \(mark)") {
                                notices.withLock { $0.contains(.mark(mark)) }
                            }
                            let noticed = notices.withLock { told -> Set<Int64> in
                                Set(
                                    told.prefix { $0 != .mark(mark) }.compactMap { notice -> Int64? in
                                        guard case .emit(namespace, _, let position, _) = notice else { return nil }
                                        return position.offset
                                    })
                            }
                            let missing = top.offset == 0 ? [] : (1...top.offset).filter { !noticed.contains($0) }
                            #expect(missing.isEmpty, "\(mark): read at \(top); not noticed before the mark: \(missing)")
                            lastTops[namespace] = top.offset
                        }
                    }
                    group.cancelAll()
                    #expect(lastTops.values.allSatisfy { $0 >= 40 }, "the writers kept writing: \(lastTops)")
                }
            }
        }
    }

    @Test("of ten concurrent claims of a session's next generation exactly one succeeds, and its old owner is told")
    func claimRace() async throws {
        try await withTestDatabase { database in
            let store = Self.store(database)
            let session = StoredSession(
                pid: uniqueName("pid"), namespace: "/chat", sid: "sid", userId: "u1",
                rooms: ["sid": .start, "order:1": StreamPosition(epoch: "e1", offset: 4)], state: .connected,
                generation: 3, owner: "old",
                changedAt: Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded()))
            try await store.save(session)
            #expect(try await store.session(pid: session.pid) == session)
            try await Self.following(store) { notices in
                let winners = try await withThrowingTaskGroup(of: String?.self) { group in
                    for index in 0..<10 {
                        var claim = session
                        claim.generation = 4
                        claim.owner = "instance-\(index)"
                        claim.state = .connected
                        group.addTask { try await store.claim(claim) ? claim.owner : nil }
                    }
                    return try await group.reduce(into: [String]()) { if let owner = $1 { $0.append(owner) } }
                }
                #expect(winners.count == 1)
                // The winning claim's notice tells the old owner; the losing claims tell nobody.
                try await eventually(timeout: .seconds(5), "the claim's notice") { notices.withLock { $0.count } == 1 }
                guard case .sessionClaimed(let pid, let generation, let owner) = notices.withLock({ $0[0] }) else {
                    throw ProtocolMismatch("not a claim")
                }
                #expect(pid == session.pid && generation == 4 && owner == winners[0])
                // The old owner's late write changes nothing.
                try await store.save(session)
                #expect(try await store.session(pid: session.pid)?.generation == 4)
            }
        }
    }

    @Test("a claim tells nobody where its session was stored disconnected or by the claimer, else it does")
    func claimNotices() async throws {
        try await withTestDatabase { database in
            let store = Self.store(database)
            try await Self.following(store) { notices in
                let claims: [(stored: StoredSession.State, owner: String, told: Bool)] = [
                    (.disconnected, "old", false), (.disconnected, "new", false), (.connected, "old", false),
                    (.connected, "new", true),
                ]
                for (index, claim) in claims.enumerated() {
                    let session = StoredSession(
                        pid: uniqueName("pid"), namespace: "/chat", sid: "sid-\(index)", userId: "u1",
                        rooms: ["sid-\(index)": .start], state: claim.stored, generation: 1, owner: "old",
                        changedAt: Date())
                    try await store.save(session)
                    var next = session
                    next.generation = 2
                    next.owner = claim.owner
                    next.state = .connected
                    #expect(try await store.claim(next))
                    // A mark comes back behind every notice of what committed before it.
                    let mark = uniqueName("mark")
                    try await store.mark(mark)
                    try await eventually(timeout: .seconds(5), "the mark") {
                        notices.withLock { $0.contains { if case .mark(mark) = $0 { true } else { false } } }
                    }
                    let told = notices.withLock { received in
                        received.contains {
                            if case .sessionClaimed(session.pid, 2, claim.owner) = $0 { true } else { false }
                        }
                    }
                    #expect(told == claim.told, "stored \(claim.stored) by old, claimed by \(claim.owner)")
                }
            }
        }
    }

    struct Room: Codable, Sendable { var room: String }
    struct Joined: Codable, Sendable { var ok = true }

    /// Runs a realtime server on `store` whose namespace `/feed` lets a socket `join` any room, and a WebSocket
    /// connected to it, for `body` (the namespace and the socket).
    static func withFeedSocket(
        store: PostgresRealtimeStore, socketIO: SocketIOConfiguration, logger: Logger,
        _ body: @Sendable (SocketIONamespace, TestWebSocket) async throws -> Void
    ) async throws {
        let server = RealtimeServer(
            configuration: EngineConfiguration(), socketIO: socketIO, store: store, logger: logger)
        let namespace = server.namespace("/feed")
        namespace.on("join", Room.self) { socket, request in
            socket.join(request.room)
            return Joined()
        }
        let port = TestPorts.allocate()
        let router = Router()
        server.addRoutes(to: router)
        let app = Application(
            router: router, server: RealtimeServerBuilder.http1WithWebSockets([server.engine]),
            configuration: .init(address: .hostname("127.0.0.1", port: port)), logger: logger)
        try await withRunningApplication(app, port: port, services: [server]) {
            try await withTestWebSocket(
                "ws://127.0.0.1:\(port)/socket.io/?EIO=4&transport=websocket", answerPings: true
            ) { socket in try await body(namespace, socket) }
        }
    }

    @Test("a server whose notification connection was cut catches up with what was emitted meanwhile")
    func lostNotifications() async throws {
        try await withTestDatabase { database in
            let store = Self.store(database)
            var socketIO = SocketIOConfiguration()
            socketIO.recovery = SocketIORecoverySettings()
            let room = "room-\(UUID().uuidString)"
            try await Self.withFeedSocket(
                store: store, socketIO: socketIO, logger: TestInfrastructure.logger("catch-up")
            ) { namespace, socket in
                _ = try await socket.next()
                socket.send("40/feed,")
                _ = try await socket.nextSkippingPings()
                socket.send(#"42/feed,1["join",{"room":"\#(room)"}]"#)
                #expect(try await socket.nextSkippingPings() == .text(#"43/feed,1[{"ok":true}]"#))
                try await namespace.emit("tick", SocketIOArguments([.number("1")]), toRoom: room)
                #expect(
                    try await socket.nextSkippingPings().textContent?.hasPrefix(#"42/feed,["tick",1,""#) == true)
                // Cut every connection that LISTENs on the schema's channel, and emit while they are down.
                try await database.execute(
                    """
                    SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                    WHERE query ILIKE 'LISTEN%' AND query LIKE \("%\(database.schema)_realtime%")
                    """)
                for tick in 2...4 {
                    try await namespace.emit("tick", SocketIOArguments([.number("\(tick)")]), toRoom: room)
                }
                for tick in 2...4 {
                    let frame = try await socket.nextSkippingPings(timeout: .seconds(15)).textContent ?? ""
                    #expect(frame.hasPrefix(#"42/feed,["tick",\#(tick),""#), "\(frame)")
                }
            }
        }
    }

    @Test("sockets told to leave a room as a change commits get none of the room's emits committed after it")
    func leaveInCommitOrder() async throws {
        try await withTestDatabase { database in
            let store = Self.store(database)
            let room = "room-\(UUID().uuidString)"
            try await Self.withFeedSocket(
                store: store, socketIO: SocketIOConfiguration(), logger: TestInfrastructure.logger("leave")
            ) { namespace, socket in
                let emitter = RealtimeEmitter(namespace: namespace, store: store)
                _ = try await socket.next()
                socket.send("40/feed,")
                let connected = try await socket.nextSkippingPings().textContent ?? ""
                let sid = try #require(
                    try JSONValue.parse(connected.dropFirst("40/feed,".count))["sid"]?.stringValue)
                socket.send(#"42/feed,1["join",{"room":"\#(room)"}]"#)
                #expect(try await socket.nextSkippingPings() == .text(#"43/feed,1[{"ok":true}]"#))
                // One transaction emits, takes the socket out of the room, and emits again: the socket gets the
                // first only, and nothing of the room's later emits; its own room still reaches it.
                try await database.transaction { connection in
                    try await emitter.emit("tick", SocketIOArguments([.number("1")]), toRoom: room, on: connection)
                    try await store.leave(namespace: "/feed", socketsIn: sid, room: room, on: connection)
                    try await emitter.emit("tick", SocketIOArguments([.number("2")]), toRoom: room, on: connection)
                }
                #expect(try await socket.nextSkippingPings() == .text(#"42/feed,["tick",1]"#))
                // The leave is made after the emit before it, from a notice of its own: the socket may have read tick
                // 1 before the server applied that notice (a loaded CI run checked in between), so it is waited for.
                try await eventually(timeout: .seconds(10), "the socket out of the room") {
                    namespace.sockets(in: room).isEmpty
                }
                // Many at once share marks, and every one of them returns.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<50 { group.addTask { try await namespace.noticesCaughtUp() } }
                    try await group.waitForAll()
                }
                try await namespace.emit("tick", SocketIOArguments([.number("3")]), toRoom: room)
                try await namespace.emit("done", SocketIOArguments(), toRoom: sid)
                #expect(try await socket.nextSkippingPings() == .text(#"42/feed,["done"]"#))
            }
        }
    }
}
