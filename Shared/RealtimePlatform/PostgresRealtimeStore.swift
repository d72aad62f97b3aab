import Contracts
import Foundation
import Logging
import Metrics
import PostgresNIO
import Realtime
import ServiceKit
import ServiceLifecycle
import Synchronization

// The store and what only it uses: the errors it throws and the prepared statements it runs, which change with it.

/// The realtime store in the service's own Postgres schema (tables of ServiceKit's migration
/// `0004_realtime_streams.sql`): each room's stream of recoverable emits, numbered per room under the stream row's
/// lock (``EmitNumbering``), each room's latest values in an unlogged table, and the sessions. Every change NOTIFYs
/// the schema's channel as it commits (with the packet, when it fits in a notification); every instance LISTENs on
/// it.
///
/// An emit that is part of a change is written in the change's transaction with
/// ``append(_:on:)`` (``RealtimeEmitter``): it is delivered exactly when the change commits, and never without it.
/// Latest values are written in batches by ``run()`` (the newest of each key), one statement and a few
/// notifications per batch.
package final class PostgresRealtimeStore: RealtimeStore, Service {
    let database: Database
    /// The NOTIFY channel, one per schema.
    let channel: String
    private let retention: Duration
    private let now: Now
    private let logger: Logger

    /// Latest values waiting to be written, the newest of each namespace, room and key.
    private let pendingLatest = Mutex(PendingLatestValues<RoomEmit>(limit: PostgresRealtimeStore.pendingLatestLimit))
    private let latestWaiting: AsyncStream<Void>
    private let latestWaitingInput: AsyncStream<Void>.Continuation
    /// The most latest values that may wait; past it a new key's value is dropped (its next one is written).
    static let pendingLatestLimit = 100_000
    private let latestDropped = Counter(label: "realtime_latest_dropped_total")

    /// The connection that LISTENs, while it does: marks are sent on it, so a caller that holds a pooled connection
    /// (a chat join, under its room's lock) waits for no other (joins holding every pooled connection would each wait
    /// for one to send its mark).
    private let listening = Mutex<PostgresConnection?>(nil)

    /// The largest notification payload Postgres takes is 8000 bytes: notices are kept under this.
    static let notificationLimit = 7900

    package init(database: Database, retention: Duration, now: Now, logger: Logger) {
        self.database = database
        self.channel = "\(database.schema)_realtime"
        self.retention = retention
        self.now = now
        self.logger = logger
        (latestWaiting, latestWaitingInput) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    // MARK: Emits

    package func append(_ emit: RoomEmit) async throws {
        guard emit.latestKey != nil else {
            try await database.transaction { try await self.append(emit, on: $0) }
            return
        }
        try Self.checkNames(emit)
        guard Self.latestLine(emit).utf8.count <= Self.notificationLimit else { throw RealtimeEmitTooLarge(emit) }
        let key = emit.namespace + "\t" + emit.room + "\t" + (emit.latestKey ?? "")
        let queued = pendingLatest.withLock { $0.put(emit, forKey: key) }
        if queued { latestWaitingInput.yield() } else { latestDropped.increment() }
    }

    /// Appends `emit` to its room's stream in the transaction of `connection`: numbered there, and told to every
    /// instance when that transaction commits. A latest value is not transactional: use ``append(_:)``.
    package func append(_ emit: RoomEmit, on connection: PostgresConnection) async throws {
        try await append(emit, toRooms: [emit.room], on: connection)
    }

    /// Appends `emit` to the stream of each of `rooms` (its own room ignored) in one statement, in the transaction
    /// of `connection`, numbered as `numbering` says. Callers pass rooms sorted and emit last in their transaction
    /// (rows numbered in place stay locked until commit); a namespace's emits are all numbered one way.
    package func append(
        _ emit: RoomEmit, toRooms rooms: [String], numbering: EmitNumbering = .inPlace,
        on connection: PostgresConnection
    ) async throws {
        guard !rooms.isEmpty else {
            try Self.checkNames(emit)
            return
        }
        var bindings = PostgresBindings()
        try appendEmitArguments(emit, toRooms: rooms, to: &bindings)
        switch numbering {
        case .inPlace: try await connection.queryWhileOpen(AppendEmitInPlace.self, bindings, logger: logger)
        case .atCommit: try await connection.queryWhileOpen(StageEmit.self, bindings, logger: logger)
        }
    }

    /// The call that writes an emit numbered as `numbering` says inside a statement of the caller's (a change, its
    /// emit and its events in one round trip), its seven parameters numbered from `first`: the `realtime_emit`
    /// function (migration 0007) in place, the `realtime_stage` function (migration 0009) at commit. The call decides
    /// the numbering; both take the values of ``appendEmitArguments(_:toRooms:to:)``.
    package static func emitCall(numbering: EmitNumbering, parametersFrom first: Int) -> String {
        let function =
            switch numbering {
            case .inPlace: "realtime_emit"
            case .atCommit: "realtime_stage"
            }
        return sqlCall(
            function, parameterTypes: ["text", "text[]", "text", "text[]", "text", "boolean", "text"], from: first)
    }

    /// Appends the values of ``emitCall(numbering:parametersFrom:)`` that write `emit` to the stream of each of
    /// `rooms` (its own room ignored) to `bindings`, whichever the numbering. Throws for names a notice cannot carry.
    package func appendEmitArguments(_ emit: RoomEmit, toRooms rooms: [String], to bindings: inout PostgresBindings)
        throws
    {
        for room in rooms { try Self.checkNames(namespace: emit.namespace, room: room) }
        try Self.checkNames(emit)
        let attachments = emit.attachments.map { Data($0).base64EncodedString() }
        // The packet comes with the notice when it fits (its room's feed reads it otherwise).
        let longestRoom = rooms.max(by: { $0.utf8.count < $1.utf8.count }) ?? ""
        let header = ["e", emit.namespace, longestRoom, "epoch-", "offset-9999999999", emit.except ?? ""]
            .joined(separator: "\t")
        let inline = attachments.isEmpty && header.utf8.count + 1 + emit.packet.utf8.count <= Self.notificationLimit
        bindings.append(emit.namespace)
        bindings.append(rooms)
        bindings.append(emit.packet)
        bindings.append(attachments)
        if let except = emit.except { bindings.append(except) } else { bindings.appendNull() }
        bindings.append(inline)
        bindings.append(channel)
    }

    /// Room and namespace names travel in tab-separated notices: a tab or a line break in one is refused.
    private static func checkNames(namespace: String, room: String, _ others: String?...) throws {
        for name in [namespace, room] + others.compactMap({ $0 })
        where name.utf8.contains(where: { $0 == 9 || $0 == 10 || $0 == 13 }) {
            throw RealtimeEmitTooLarge(
                namespace: namespace, room: room,
                reason: "a namespace, room, key or socket id has a tab or a line break")
        }
    }

    private static func checkNames(_ emit: RoomEmit) throws {
        try checkNames(namespace: emit.namespace, room: emit.room, emit.latestKey, emit.except)
    }

    private static func latestLine(_ emit: RoomEmit) -> String {
        ["l", emit.namespace, emit.room, emit.latestKey ?? "", emit.packet].joined(separator: "\t")
    }

    package func positions(namespace: String, rooms: [String]) async throws -> [String: StreamPosition] {
        var positions = Dictionary(rooms.map { ($0, StreamPosition.start) }, uniquingKeysWith: { first, _ in first })
        try await database.withConnection { connection in
            let bindings = PostgresBindings(namespace, rooms)
            for row in try await connection.queryWhileOpen(ReadStreamTops.self, bindings, logger: logger) {
                let (room, epoch, top) = try row.decode((String, String, Int64).self)
                positions[room] = StreamPosition(epoch: epoch, offset: top)
            }
        }
        return positions
    }

    package func mark(_ id: String) async throws {
        // Sent on any other connection, it would come back here only once this instance listens again.
        guard let connection = listening.withLock({ $0 }) else { throw RealtimeNoticesLost() }
        try await connection.queryWhileOpen(Notify.self, PostgresBindings(channel, "m\t" + id), logger: logger)
    }

    /// Takes the sockets in room `socketsIn` out of `room` on every instance when the transaction of `connection`
    /// commits (``RealtimeNotice/leave(namespace:socketsIn:room:)``): in order with the emits, so none of `room`'s
    /// emits committed after reaches them. A notice, not a stream: a server that lost its notices meanwhile misses
    /// it, so callers keep a durable way as well (an event every instance consumes).
    package func leave(namespace: String, socketsIn: String, room: String, on connection: PostgresConnection)
        async throws
    {
        try Self.checkNames(namespace: namespace, room: room, socketsIn)
        let notice = ["x", namespace, socketsIn, room].joined(separator: "\t")
        try await connection.queryWhileOpen(Notify.self, PostgresBindings(channel, notice), logger: logger)
    }

    package func emits(namespace: String, room: String, after position: StreamPosition, byteLimit: Int) async throws
        -> StreamRead
    {
        try await database.withConnection { connection in
            var stream: StreamPosition?
            let roomBindings = PostgresBindings(namespace, [room])
            for row in try await connection.queryWhileOpen(ReadStreamTops.self, roomBindings, logger: logger) {
                let (_, epoch, offset) = try row.decode((String, String, Int64).self)
                stream = StreamPosition(epoch: epoch, offset: offset)
            }
            let (after, top): (Int64, StreamPosition)
            switch StreamRead.plan(after: position, top: stream) {
            case .decided(let read): return read
            case .readAfter(let offset, let read): (after, top) = (offset, read)
            }
            var found: [StreamEmit] = []
            let bindings = PostgresBindings(namespace, room, top.epoch ?? "", after, top.offset)
            for row in try await connection.queryWhileOpen(ReadRoomEmits.self, bindings, logger: logger) {
                let (offset, packet, attachments, except) = try row.decode((Int64, String, [String], String?).self)
                found.append(
                    Self.storedEmit(
                        namespace: namespace, room: room, position: StreamPosition(epoch: top.epoch, offset: offset),
                        packet: packet, attachments: attachments, except: except))
            }
            return StreamRead.found(found, after: after, top: top, byteLimit: byteLimit)
        }
    }

    package func catchUp(namespace: String, after positions: [String: StreamPosition], byteLimit: Int) async throws
        -> [String: RoomCatchUp]
    {
        let rooms = Array(positions.keys)
        // No epoch (the room had no stream where the client joined): empty.
        let epochs = rooms.map { positions[$0]?.epoch ?? "" }
        let afters = rooms.map { positions[$0]?.epoch == nil ? 0 : positions[$0]?.offset ?? 0 }
        var tops: [String: StreamPosition] = [:]
        var found: [String: [StreamEmit]] = [:]
        var latest: [String: [String: String]] = [:]
        try await database.withConnection { connection in
            let bindings = PostgresBindings(rooms, epochs, afters, namespace)
            for row in try await connection.queryWhileOpen(CatchUp.self, bindings, logger: logger) {
                let (kind, room, text, number, packet, attachments, except) = try row.decode(
                    (String, String, String, Int64?, String?, [String]?, String?).self)
                switch kind {
                case "t":
                    tops[room] = StreamPosition(epoch: text, offset: number ?? 0)
                case "e":
                    let position = StreamPosition(epoch: text, offset: number ?? 0)
                    found[room, default: []].append(
                        Self.storedEmit(
                            namespace: namespace, room: room, position: position, packet: packet ?? "",
                            attachments: attachments ?? [], except: except))
                default:
                    latest[room, default: [:]][text] = packet ?? ""
                }
            }
        }
        // The byte limit holds for all the rooms together: each room's read has what the earlier ones left.
        var budget = byteLimit
        var caughtUp: [String: RoomCatchUp] = [:]
        for (room, position) in positions.sorted(by: { $0.key < $1.key }) {
            let read: StreamRead
            switch StreamRead.plan(after: position, top: tops[room]) {
            case .decided(let decided): read = decided
            case .readAfter(let after, let top):
                read = StreamRead.found(found[room] ?? [], after: after, top: top, byteLimit: max(budget, 0))
            }
            if case .emits(let emits, _) = read { budget -= emits.reduce(0) { $0 + $1.bytes } }
            caughtUp[room] = RoomCatchUp(read: read, top: tops[room] ?? .start, latest: latest[room] ?? [:])
        }
        return caughtUp
    }

    /// An emit as `realtime_emits` holds it (its attachments in base64).
    private static func storedEmit(
        namespace: String, room: String, position: StreamPosition, packet: String, attachments: [String],
        except: String?
    ) -> StreamEmit {
        StreamEmit(
            namespace: namespace, room: room, position: position, packet: packet,
            attachments: attachments.compactMap { Data(base64Encoded: $0).map { [UInt8]($0) } }, except: except)
    }

    package func latest(namespace: String, room: String) async throws -> [String: String] {
        try await database.withConnection { connection in
            var values: [String: String] = [:]
            let rows = try await connection.queryWhileOpen(
                """
                SELECT key, packet FROM realtime_latest WHERE namespace = \(namespace) AND room = \(room) AND NOT closed
                """,
                logger: logger)
            for try await (key, packet) in rows.decode((String, String).self) { values[key] = packet }
            return values
        }
    }

    /// Closes `room`'s latest values of `keys` in the transaction of `connection`. A value of one of them written
    /// before is told before the transaction's own emits; from its commit on, one written by any instance (which may
    /// learn of the change later) is neither stored nor told, and a recovering socket is given none of them. Values
    /// are written under their row's lock, so one racing the close waits for it. A transaction closing several
    /// rooms closes them in room order (the order batches lock rows in).
    package func closeLatest(namespace: String, room: String, keys: [String], on connection: PostgresConnection)
        async throws
    {
        try await connection.queryWhileOpen(
            """
            INSERT INTO realtime_latest AS l (namespace, room, key, packet, closed)
            SELECT \(namespace), \(room), key, '', true FROM unnest(\(keys)::text[]) AS key ORDER BY key
            ON CONFLICT (namespace, room, key) DO UPDATE SET packet = '', closed = true, updated_at = now()
            """, logger: logger)
    }

    /// Undoes ``closeLatest(namespace:room:keys:on:)`` for every key of `room`, in the transaction of `connection`.
    package func reopenLatest(namespace: String, room: String, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            "DELETE FROM realtime_latest WHERE namespace = \(namespace) AND room = \(room) AND closed",
            logger: logger)
    }

    /// Writes the pending latest values until graceful shutdown (then the last ones), a batch at a time.
    package func run() async throws {
        await cancelWhenGracefulShutdown {
            for await _ in self.latestWaiting {
                await self.writePendingLatest()
            }
        }
        await writePendingLatest()
    }

    private func writePendingLatest() async {
        while true {
            let batch = pendingLatest.withLock { $0.take(1000) }
            guard !batch.isEmpty else { return }
            // Notices packed several to a notification, a line each; a value whose key is closed is neither
            // written nor told. Rows are locked in (namespace, room, key) order, as ``closeLatest`` callers lock
            // them, so a batch and a closing transaction (or two instances' batches) never wait for each other in a
            // circle.
            var lines: [String] = []
            var chunks: [Int32] = []
            var chunk: Int32 = 0
            var chunkBytes = 0
            for line in batch.map(Self.latestLine) {
                if chunkBytes > 0 && chunkBytes + 1 + line.utf8.count > Self.notificationLimit {
                    chunk += 1
                    chunkBytes = 0
                }
                chunkBytes += (chunkBytes == 0 ? 0 : 1) + line.utf8.count
                lines.append(line)
                chunks.append(chunk)
            }
            do {
                let bindings = PostgresBindings(
                    batch.map(\.namespace), batch.map(\.room), batch.map { $0.latestKey ?? "" }, batch.map(\.packet),
                    lines, chunks, channel)
                try await database.execute(WriteLatestValues.self, bindings)
            } catch {
                // Latest values go stale within seconds: the next ones are written instead of these.
                latestDropped.increment(by: batch.count)
                logger.warning(
                    "could not write latest realtime values",
                    metadata: ["error": "\(error)", "values": "\(batch.count)"])
                try? await Task.sleep(for: .milliseconds(200))
                return
            }
        }
    }

    // MARK: Sessions

    /// A session's rooms in its `rooms` column.
    private struct JoinedAt: Codable {
        var epoch: String?
        var offset: Int64
    }

    private static func encodeRooms(_ rooms: [String: StreamPosition]) throws -> String {
        String(
            decoding: try ContractCoding.encode(rooms.mapValues { JoinedAt(epoch: $0.epoch, offset: $0.offset) }),
            as: UTF8.self)
    }

    package func save(_ session: StoredSession) async throws {
        let bindings = PostgresBindings(
            session.pid, session.namespace, session.sid, session.userId, try Self.encodeRooms(session.rooms),
            session.state.rawValue, session.generation, session.owner, session.changedAt)
        try await database.execute(SaveSession.self, bindings)
    }

    package func touch(pids: [String], owner: String, at now: Date) async throws {
        guard !pids.isEmpty else { return }
        try await database.client.execute(
            """
            UPDATE realtime_sessions SET changed_at = \(now)
            WHERE pid = ANY(\(pids)) AND owner = \(owner) AND state = 'connected'
            """, logger: logger)
    }

    package func end(pid: String, generation: Int) async throws {
        let bindings = PostgresBindings(pid, generation)
        try await database.execute(EndSession.self, bindings)
    }

    package func session(pid: String) async throws -> StoredSession? {
        try await database.withConnection { connection in
            let bindings = PostgresBindings(pid)
            for row in try await connection.queryWhileOpen(ReadSession.self, bindings, logger: logger) {
                let (namespace, sid, userId, rooms, state, generation, owner, changedAt) = try row.decode(
                    (String, String, String?, String, String, Int, String, Date).self)
                guard let state = StoredSession.State(rawValue: state) else {
                    throw RealtimeStoreInconsistency(what: "session \(pid) has the state '\(state)'")
                }
                let joined = try JSONDecoder().decode([String: JoinedAt].self, from: Data(rooms.utf8))
                return StoredSession(
                    pid: pid, namespace: namespace, sid: sid, userId: userId,
                    rooms: joined.mapValues { StreamPosition(epoch: $0.epoch, offset: $0.offset) }, state: state,
                    generation: generation, owner: owner, changedAt: changedAt)
            }
            return nil
        }
    }

    package func claim(_ session: StoredSession) async throws -> Bool {
        let bindings = PostgresBindings(
            session.pid, session.generation, session.owner, session.changedAt, try Self.encodeRooms(session.rooms),
            channel)
        return try await database.withConnection { connection in
            !(try await connection.queryWhileOpen(ClaimSession.self, bindings, logger: logger)).isEmpty
        }
    }

    // MARK: Following

    package func follow(
        ready: @escaping @Sendable () -> Void, _ receive: @escaping @Sendable ([RealtimeNotice]) -> Void
    ) async throws {
        try await database.client.withConnection { connection in
            try await connection.listen(on: channel) { notifications in
                listening.withLock { $0 = connection }
                defer { listening.withLock { $0 = nil } }
                ready()
                for try await notification in notifications {
                    let notices = Self.notices(in: notification.payload)
                    if !notices.isEmpty { receive(notices) }
                }
                throw RealtimeNoticesLost()
            }
        }
    }

    /// The notices of one notification: lines of tab-separated fields (`e`, `l`, `m`, `s` or `x` first). Split on its
    /// UTF-8 bytes: newlines and tabs are single bytes, and splitting by characters walked every packet's grapheme
    /// clusters on every instance (2.8% of the order service's CPU during the pickup benchmark).
    package static func notices(in payload: String) -> [RealtimeNotice] {
        var notices: [RealtimeNotice] = []
        for line in payload.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            func fields(_ maxSplits: Int = .max) -> [String] {
                line.split(separator: UInt8(ascii: "\t"), maxSplits: maxSplits, omittingEmptySubsequences: false)
                    .map { String(Substring($0)) }
            }
            switch line.first {
            case UInt8(ascii: "e"):
                let fields = fields(6)
                guard fields.count >= 6, let offset = Int64(fields[4]) else { continue }
                let (namespace, room) = (fields[1], fields[2])
                let position = StreamPosition(epoch: fields[3], offset: offset)
                let except = fields[5].isEmpty ? nil : fields[5]
                let packet = fields.count == 7 ? fields[6] : nil
                notices.append(
                    .emit(
                        namespace: namespace, room: room, position: position,
                        packet: packet.map {
                            StreamEmit(namespace: namespace, room: room, position: position, packet: $0, except: except)
                        }))
            case UInt8(ascii: "l"):
                let fields = fields(4)
                guard fields.count == 5 else { continue }
                notices.append(.latest(namespace: fields[1], room: fields[2], key: fields[3], packet: fields[4]))
            case UInt8(ascii: "m"):
                let fields = fields(1)
                guard fields.count == 2 else { continue }
                notices.append(.mark(fields[1]))
            case UInt8(ascii: "x"):
                let fields = fields()
                guard fields.count == 4 else { continue }
                notices.append(.leave(namespace: fields[1], socketsIn: fields[2], room: fields[3]))
            case UInt8(ascii: "s"):
                let fields = fields()
                guard fields.count == 4, let generation = Int(fields[2]) else { continue }
                notices.append(.sessionClaimed(pid: fields[1], generation: generation, owner: fields[3]))
            default:
                continue
            }
        }
        return notices
    }

    // MARK: Trimming

    /// Deletes what no recovery needs any more, by one instance per schema at a time: emits and latest values
    /// older than the retention, sessions not heard of for as long, and streams nothing was emitted to for a week.
    package func trim() async throws {
        let lockName = "\(database.schema).realtime-trim"
        let cutoff = now() - retention
        let seconds = Int(retention.timeInterval)
        try await database.transaction { connection in
            let rows = try await connection.queryWhileOpen(
                "SELECT pg_try_advisory_xact_lock(hashtext(\(lockName)))", logger: logger)
            var leader = false
            for try await locked in rows.decode(Bool.self) { leader = locked }
            guard leader else { return }
            try await connection.queryWhileOpen(
                """
                DELETE FROM realtime_emits WHERE emitted_at < now() - make_interval(secs => \(seconds))
                """, logger: logger)
            try await connection.queryWhileOpen(
                """
                DELETE FROM realtime_latest WHERE updated_at < now() - make_interval(secs => \(seconds))
                """, logger: logger)
            try await connection.queryWhileOpen(
                "DELETE FROM realtime_sessions WHERE changed_at < \(cutoff)", logger: logger)
            try await connection.queryWhileOpen(
                "DELETE FROM realtime_streams WHERE updated_at < now() - interval '7 days'", logger: logger)
        }
    }
}

/// The realtime store's notification connection was lost; its server follows again.
struct RealtimeNoticesLost: Error, CustomStringConvertible {
    var description: String { "the realtime notification connection ended" }
}

/// The store holds something it never writes.
struct RealtimeStoreInconsistency: Error, CustomStringConvertible {
    var what: String
    var description: String { "the realtime store is inconsistent: \(what)" }
}

/// An emit the store cannot carry: a latest value larger than a notification, or names with tabs or line breaks.
package struct RealtimeEmitTooLarge: Error, CustomStringConvertible {
    package var namespace: String
    package var room: String
    package var reason: String

    init(namespace: String, room: String, reason: String) {
        self.namespace = namespace
        self.room = room
        self.reason = reason
    }

    init(_ emit: RoomEmit) {
        self.init(
            namespace: emit.namespace, room: emit.room,
            reason: "a latest value must fit in a notification (7,900 bytes)")
    }

    package var description: String { "cannot emit to \(namespace) \(room): \(reason)" }
}

/// Numbers an emit to each room in place and tells it on commit: $1 namespace, $2 rooms, $3 packet, $4
/// attachments, $5 the socket left out, $6 whether the notice carries the packet, $7 the channel.
enum AppendEmitInPlace: PreparedStatementText {
    static let sql = "SELECT " + PostgresRealtimeStore.emitCall(numbering: .inPlace, parametersFrom: 1)
}

/// Stages an emit to each room, numbered as the transaction commits (migrations 0006 and 0009): the same $1-$7 as
/// ``AppendEmitInPlace`` (the trigger notifies its schema's channel whatever $7).
enum StageEmit: PreparedStatementText {
    static let sql = "SELECT " + PostgresRealtimeStore.emitCall(numbering: .atCommit, parametersFrom: 1)
}

/// Writes latest values, one a row of unnest($1 namespaces, $2 rooms, $3 keys, $4 packets, $5 notice lines, $6
/// notification numbers), each unless its key is closed, locking rows in (namespace, room, key) order; notifies
/// channel $7 with the lines of the values written, joined by notification number, as it commits.
enum WriteLatestValues: PreparedStatementText {
    static let sql = """
        WITH batch AS (
            SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::integer[])
                WITH ORDINALITY AS b(namespace, room, key, packet, line, chunk, ordinal)
        ), written AS (
            INSERT INTO realtime_latest AS l (namespace, room, key, packet)
            SELECT namespace, room, key, packet FROM batch ORDER BY namespace, room, key
            ON CONFLICT (namespace, room, key) DO UPDATE SET packet = excluded.packet, updated_at = now()
                WHERE NOT l.closed
            RETURNING l.namespace, l.room, l.key
        )
        SELECT pg_notify($7::text, string_agg(batch.line, E'\\n' ORDER BY batch.ordinal))
        FROM batch JOIN written USING (namespace, room, key) GROUP BY batch.chunk
        """
}

/// The stream (epoch, top) of each of rooms $2 in namespace $1 that has one.
enum ReadStreamTops: PreparedStatementText {
    static let sql = """
        SELECT room, epoch, top FROM realtime_streams WHERE namespace = $1::text AND room = ANY($2::text[])
        """
}

/// Notifies channel $1 with $2 (a server's mark, sockets leaving a room) when it commits: after every notification
/// already queued.
enum Notify: PreparedStatementText {
    static let sql = "SELECT pg_notify($1::text, $2::text)"
}

/// The emits of room $2 in namespace $1 in epoch $3, after offset $4 up to $5 (the top read first), oldest first.
enum ReadRoomEmits: PreparedStatementText {
    static let sql = """
        SELECT "offset", packet, attachments, except_socket FROM realtime_emits
        WHERE namespace = $1::text AND room = $2::text AND epoch = $3::text AND "offset" > $4::bigint
          AND "offset" <= $5::bigint
        ORDER BY "offset" LIMIT 1000
        """
}

/// A reconnecting client's rooms in one statement, for rooms $1 with its epochs $2 ('' for none) and offsets $3
/// in namespace $4: each stream's top (`t`), the emits after the client's position up to it (`e`), and each room's
/// latest values (`l`).
enum CatchUp: PreparedStatementText {
    static let sql = """
        WITH w AS (
            SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) AS w(room, epoch, after)
        ), s AS (
            SELECT s.room, s.epoch, s.top FROM realtime_streams s JOIN w ON s.room = w.room
            WHERE s.namespace = $4::text
        )
        SELECT 't', s.room, s.epoch, s.top, NULL::text, NULL::text[], NULL::text FROM s
        UNION ALL
        SELECT 'e', e.room, e.epoch, e."offset", e.packet, e.attachments, e.except_socket
        FROM s JOIN w ON w.room = s.room AND (w.epoch = '' OR w.epoch = s.epoch)
        JOIN realtime_emits e ON e.namespace = $4::text AND e.room = s.room AND e.epoch = s.epoch
            AND e."offset" > w.after AND e."offset" <= s.top
        UNION ALL
        SELECT 'l', l.room, l.key, NULL::bigint, l.packet, NULL::text[], NULL::text
        FROM realtime_latest l JOIN w ON w.room = l.room WHERE l.namespace = $4::text AND NOT l.closed
        ORDER BY 1 DESC, 2, 4
        """
}

/// Saves session $1 (namespace $2, sid $3, user $4, rooms $5, state $6, generation $7, owner $8, changed at $9)
/// unless a later generation of it is stored.
enum SaveSession: PreparedStatementText {
    static let sql = """
        INSERT INTO realtime_sessions AS s (pid, namespace, sid, user_id, rooms, state, generation, owner, changed_at)
        VALUES ($1::text, $2::text, $3::text, $4::text, $5::jsonb, $6::text, $7::integer, $8::text, $9::timestamptz)
        ON CONFLICT (pid) DO UPDATE SET namespace = excluded.namespace, sid = excluded.sid,
            user_id = excluded.user_id, rooms = excluded.rooms, state = excluded.state,
            generation = excluded.generation, owner = excluded.owner, changed_at = excluded.changed_at
        WHERE s.generation <= excluded.generation
        """
}

/// Forgets session $1 unless a generation after $2 is stored.
enum EndSession: PreparedStatementText {
    static let sql = "DELETE FROM realtime_sessions WHERE pid = $1::text AND generation <= $2::integer"
}

/// Session $1 as stored.
enum ReadSession: PreparedStatementText {
    static let sql = """
        SELECT namespace, sid, user_id, rooms::text, state, generation, owner, changed_at
        FROM realtime_sessions WHERE pid = $1::text
        """
}

/// Claims session $1 as generation $2 for owner $3 at $4 with rooms $5, if generation $2 - 1 is stored; a row comes
/// back if it was claimed. Where another owner stored it connected (its socket may still be open there), tells channel
/// $6 as the claim commits. Where it was stored disconnected, its socket is gone and nobody is told: a notification
/// takes Postgres's one lock for notifying commits, and most reconnects follow a drop their server saw.
enum ClaimSession: PreparedStatementText {
    static let sql = """
        WITH previous AS (
            SELECT state, owner FROM realtime_sessions WHERE pid = $1::text AND generation = $2::integer - 1
        ), claimed AS (
            UPDATE realtime_sessions SET generation = $2::integer, owner = $3::text, state = 'connected',
                changed_at = $4::timestamptz, rooms = $5::jsonb
            WHERE pid = $1::text AND generation = $2::integer - 1
            RETURNING pid
        )
        SELECT CASE WHEN coalesce(previous.state <> 'disconnected' AND previous.owner <> $3::text, true)
            THEN pg_notify($6::text, concat_ws(E'\\t', 's', claimed.pid, $2::text, $3::text)) END
        FROM claimed LEFT JOIN previous ON true
        """
}
