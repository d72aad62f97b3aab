import Contracts
import Foundation
import Logging
import Synchronization

/// Socket.IO v5 on top of an ``EngineServer``: namespaces, connection authorization, events and
/// acknowledgements, rooms, fan-out to every instance through a ``RealtimeLog``, and connection state recovery
/// (Socket.IO v4.6) on whichever instance a client reconnects to.
///
/// Every emit is appended to the log and delivered when the log applies it, on every instance in the same order:
/// its position is the offset clients see, so a socket restored anywhere gets exactly the emits after the last
/// one it received. Without a log (one process, tests) emits are applied in place, in the same way.
package final class SocketIOServer: EngineHandler, Sendable {
    let logger: Logger
    /// Identifies this process in the log.
    package let instanceId: String
    private let namespaces = Mutex<[String: SocketIONamespace]>([:])
    private let connections = Mutex<[String: SocketIOConnection]>([:])
    private let log: (any RealtimeLog)?
    let configuration: SocketIOConfiguration

    /// Whether the log was read up to this instance's start (always, without a log). Until then handshakes are
    /// refused (503): the emits before the start must be held for recovery, and must not reach new sockets late.
    package var acceptsSessions: Bool { logState.withLock { $0.caughtUp } }

    /// How long the realtime log drops an emit whose dedupe key it applied already; nil without a log.
    package var dedupeWindow: Duration? {
        log == nil ? nil : (configuration.recovery ?? SocketIORecoverySettings()).window
    }

    private struct LogState {
        var ledger: RecoveryLedger
        /// The next offset when there is no log.
        var nextLocalOffset: Int64 = 0
        /// The log was read up to this instance's start marker: before, its records predate every local socket.
        var caughtUp: Bool
        /// Connections waiting for the log to be applied up to an offset.
        var waiters: [UUID: (offset: Int64, continuation: CheckedContinuation<Void, Never>)] = [:]

        /// Resumes the waiters whose offset was applied.
        mutating func resumeWaiters() {
            guard !waiters.isEmpty else { return }
            for (id, waiter) in waiters where waiter.offset <= ledger.head {
                waiters.removeValue(forKey: id)
                waiter.continuation.resume()
            }
        }
    }

    private let logState: Mutex<LogState>
    /// Emits and session records wait here to be appended, in order and in batches, by ``runLog()``: an emit
    /// costs its caller nothing, and a burst costs one broker round trip per batch. At most ``outgoingLimit`` wait;
    /// beyond it an emit is delivered on this instance only and a session record dropped (that session recovers
    /// less, never wrongly), both counted.
    private let outgoing = Mutex<[RealtimeRecord]>([])
    private let outgoingWaiting: AsyncStream<Void>
    private let outgoingWaitingInput: AsyncStream<Void>.Continuation
    static let outgoingLimit = 100_000
    static let batchSize = 1000

    package init(
        configuration: SocketIOConfiguration = SocketIOConfiguration(), log: (any RealtimeLog)?, logger: Logger
    ) {
        self.configuration = configuration
        self.log = log
        self.logger = logger
        self.instanceId = UUID().uuidString
        self.logState = Mutex(
            LogState(
                ledger: RecoveryLedger(settings: configuration.recovery ?? SocketIORecoverySettings()),
                caughtUp: log == nil))
        (outgoingWaiting, outgoingWaitingInput) = AsyncStream.makeStream(
            bufferingPolicy: .bufferingNewest(1))
    }

    /// The namespace `name` (e.g. `/chat`), created on first use. Clients can connect only to created ones.
    package func namespace(_ name: String) -> SocketIONamespace {
        let name = name.hasPrefix("/") ? name : "/" + name
        return namespaces.withLock { namespaces in
            if let existing = namespaces[name] { return existing }
            let created = SocketIONamespace(name: name, server: self, logger: logger)
            namespaces[name] = created
            return created
        }
    }

    /// Every namespace's sockets on this instance.
    package var connectedSocketCount: Int {
        namespaces.withLock { Array($0.values) }.reduce(0) { $0 + $1.sockets.count }
    }

    // MARK: EngineHandler

    package func opened(_ session: EngineSession) {
        let connection = SocketIOConnection(session: session, server: self)
        connections.withLock { $0[session.id] = connection }
    }

    package func receive(_ message: EngineMessage, from session: EngineSession) throws(EngineProtocolError) {
        guard let connection = connections.withLock({ $0[session.id] }) else { return }
        try connection.receive(message)
    }

    package func closed(_ session: EngineSession, reason: EngineCloseReason) async {
        guard let connection = connections.withLock({ $0.removeValue(forKey: session.id) }) else { return }
        await connection.closed(reason: reason)
    }

    // MARK: Packets, in order per connection

    func handle(_ item: SocketIOPacketWithAttachments, on connection: SocketIOConnection)
        async throws(EngineProtocolError)
    {
        if let (socket, reason) = item.detach {
            await socket.namespace.disconnected(socket, reason: reason)
            return
        }
        let packet = item.packet
        switch packet.type {
        case .connect:
            try await connect(packet, on: connection)
        case .disconnect:
            guard let socket = connection.socket(in: packet.namespace) else {
                throw EngineProtocolError("DISCONNECT from a namespace not joined")
            }
            connection.detach(socket, reason: .clientNamespaceDisconnect)
        case .event, .binaryEvent:
            guard let socket = connection.socket(in: packet.namespace), case .array(let values) = packet.data else {
                throw EngineProtocolError("EVENT for a namespace not joined")
            }
            let event: String =
                switch values[0] {
                case .string(let name): name
                default: values[0].serialized
                }
            let ack = packet.ackId.map { SocketIOAck(socket: socket, id: $0) }
            guard socket.admitEvent() else {
                RealtimeMetrics.rateLimited.increment()
                ack?.send(
                    SocketIOArguments([SocketIOError.body(code: .rateLimited, message: "too many events; slow down")]))
                return
            }
            guard let handler = socket.namespace.handler(for: event) else {
                logger.debug(
                    "no handler", metadata: ["socketio.event": "\(event)", "socketio.namespace": "\(packet.namespace)"])
                return
            }
            await handler(socket, SocketIOArguments(Array(values.dropFirst()), attachments: item.attachments), ack)
        case .ack, .binaryAck, .connectError:
            break
        }
    }

    private func connect(_ packet: SocketIOPacket, on connection: SocketIOConnection) async throws(EngineProtocolError)
    {
        guard let namespace = namespaces.withLock({ $0[packet.namespace] }) else {
            refuse(packet.namespace, SocketIOConnectRefusal("Invalid namespace"), on: connection)
            return
        }
        guard connection.socket(in: namespace.name) == nil else {
            throw EngineProtocolError("CONNECT twice to one namespace")
        }
        let handshake = SocketIOHandshake(
            auth: packet.data, query: connection.session.query, headers: connection.session.headers)
        var credentials: SocketIOCredentials?
        if let authorizer = namespace.authorizer {
            do {
                credentials = try await authorizer(handshake)
            } catch let refusal as SocketIOConnectRefusal {
                refuse(namespace.name, refusal, on: connection)
                return
            } catch {
                logger.error(
                    "authorization hook failed",
                    metadata: ["error": "\(error)", "socketio.namespace": "\(namespace.name)"])
                refuse(namespace.name, SocketIOConnectRefusal("internal error", code: .internalError), on: connection)
                return
            }
        }
        let request = configuration.recovery == nil ? nil : RecoveryRequest(auth: packet.data)
        // Only a session this instance holds is worth waiting for; any other pid is refused at once, whatever offset
        // comes with it. (A session whose record this instance has not read yet, a client dropping within moments
        // of connecting, is refused too: the client connects afresh and reloads, never wrongly.)
        if let request, let offset = request.offset,
            logState.withLock({
                $0.ledger.holdsSession(pid: request.pid, namespace: namespace.name, userId: credentials?.user.userId)
            })
        {
            await waitUntilApplied(offset)
        }
        if let request,
            let socket = try await restore(
                request, in: namespace, handshake: handshake, user: credentials?.user, on: connection)
        {
            RealtimeMetrics.recoveries.increment()
            await namespace.connected(socket)
            if let expiresAt = credentials?.expiresAt { socket.expire(at: expiresAt) }
            return
        }
        let pid = configuration.recovery == nil ? nil : EngineServer.makeSessionId()
        let socket = try logState.withLock { state throws(EngineProtocolError) -> SocketIOSocket in
            let socket = SocketIOSocket(
                id: EngineServer.makeSessionId(), namespace: namespace, user: credentials?.user,
                handshake: handshake, connection: connection, pid: pid, since: state.ledger.head
            )
            guard connection.attach(socket) else { throw EngineProtocolError("CONNECT twice to one namespace") }
            namespace.register(socket)
            connection.send([EnginePacket(.message, Self.connectAnswer(socket).encoded)])
            return socket
        }
        connection.session.claim()
        await namespace.connected(socket)
        if let expiresAt = credentials?.expiresAt { socket.expire(at: expiresAt) }
    }

    /// The CONNECT answer: the socket id, and the private session id when recovery is on.
    private static func connectAnswer(_ socket: SocketIOSocket) -> SocketIOPacket {
        var fields: [(key: String, value: JSONValue)] = [("sid", .string(socket.id))]
        if let pid = socket.pid { fields.append(("pid", .string(pid))) }
        return SocketIOPacket(type: .connect, namespace: socket.namespace.name, data: .object(JSONObject(fields)))
    }

    /// Restores the session a client asks back, if it may be: the same user, within the window, and every emit it
    /// missed still held. The missed emits go out before the CONNECT answer, as Socket.IO sends them; nil leaves
    /// the client to connect afresh (it sees a new `pid` and reloads its state).
    private func restore(
        _ request: RecoveryRequest, in namespace: SocketIONamespace, handshake: SocketIOHandshake,
        user: (any SocketIOUser)?, on connection: SocketIOConnection
    ) async throws(EngineProtocolError) -> SocketIOSocket? {
        let now = configuration.now()
        let preview: RecoveryLedger.Restoration
        switch logState.withLock({
            $0.ledger.restoration(
                pid: request.pid, namespace: namespace.name, userId: user?.userId, offset: request.offset, now: now)
        }) {
        case .success(let restoration): preview = restoration
        case .failure(let refusal):
            RealtimeMetrics.recoveryRefused(refusal)
            logger.debug(
                "socket not recovered",
                metadata: ["socketio.namespace": "\(namespace.name)", "socketio.refusal": "\(refusal.rawValue)"])
            return nil
        }
        var rooms = Set(preview.session.rooms)
        if let user, let check = namespace.recoveryCheck { rooms = await check(user, preview.session.sid, rooms) }
        let allowed = rooms
        let restored = try logState.withLock { state throws(EngineProtocolError) -> SocketIOSocket? in
            // Checked again: a record applied while the rooms were checked may have changed the session.
            guard
                case .success(let restoration) = state.ledger.restoration(
                    pid: request.pid, namespace: namespace.name, userId: user?.userId, offset: request.offset, now: now)
            else { return nil }
            let session = restoration.session
            let socket = SocketIOSocket(
                id: session.sid, namespace: namespace, user: user, handshake: handshake, connection: connection,
                pid: session.pid, since: session.since, generation: session.generation + 1, recovered: true
            )
            guard connection.attach(socket) else { throw EngineProtocolError("CONNECT twice to one namespace") }
            // The same client's previous socket may still be held here (its connection not yet seen dropped).
            namespace.sockets.first { $0.id == session.sid }?.moveAway()
            namespace.register(socket, rooms: allowed.subtracting([session.sid]))
            var lastSent = request.offset
            for entry in restoration.missed where entry.rooms.contains(where: allowed.contains) {
                connection.send(entry.packets, latestKey: entry.latestKey)
                lastSent = entry.offset
            }
            if let lastSent { socket.sent(lastSent) }
            connection.send([EnginePacket(.message, Self.connectAnswer(socket).encoded)])
            var moved = session
            moved.state = .connected
            moved.rooms = Array(socket.rooms)
            moved.generation = socket.generation
            state.ledger.restored(moved, namespace: namespace.name, owner: instanceId, at: now)
            return socket
        }
        if restored != nil { connection.session.claim() }
        return restored
    }

    private func refuse(_ namespace: String, _ refusal: SocketIOConnectRefusal, on connection: SocketIOConnection) {
        var fields: [(key: String, value: JSONValue)] = [("message", .string(refusal.message))]
        if let code = refusal.code {
            fields.append(("data", .object(JSONObject([("code", .string(code.rawValue))]))))
        }
        let packet = SocketIOPacket(type: .connectError, namespace: namespace, data: .object(JSONObject(fields)))
        connection.send([EnginePacket(.message, packet.encoded)])
    }

    // MARK: The realtime log

    /// Queues an emit for the log (or, without one, applies it in place). If the log cannot take it, the emit is
    /// still delivered to this instance's sockets, without an offset.
    func broadcast(
        namespace: SocketIONamespace, rooms: [String], except: Set<String>, packets: [EnginePacket],
        latestKey: String?, dedupeKey: String?
    ) {
        var text = ""
        var attachments: [String] = []
        for packet in packets {
            switch packet.payload {
            case .text(let value): text = value
            case .binary(let bytes): attachments.append(Data(bytes).base64EncodedString())
            }
        }
        let record = RealtimeRecord(
            origin: instanceId, namespace: namespace.name, at: configuration.now(),
            broadcast: RealtimeBroadcast(
                rooms: rooms, except: except.sorted(), packet: text, attachments: attachments, latestKey: latestKey,
                dedupeKey: dedupeKey)
        )
        enqueue(record)
    }

    /// Records a socket's session for recovery: connected (with its rooms), disconnected, or ended.
    func record(_ socket: SocketIOSocket, state: RecoverableSession.State, rooms: Set<String>? = nil) {
        guard configuration.recovery != nil, let pid = socket.pid else { return }
        let record = RealtimeRecord(
            origin: instanceId, namespace: socket.namespace.name, at: configuration.now(),
            session: RecoverableSession(
                pid: pid, sid: socket.id, userId: socket.user?.userId, rooms: Array(rooms ?? socket.rooms).sorted(),
                state: state, since: socket.since, lastSent: socket.lastSent,
                disconnectedAt: state == .disconnected ? logState.withLock { $0.ledger.head } : nil,
                generation: socket.generation)
        )
        enqueue(record)
    }

    /// Hands a record to the log: queued for ``runLog()``, or applied in place when there is no log.
    private func enqueue(_ record: RealtimeRecord) {
        guard log != nil else {
            applyInPlace(record)
            return
        }
        let queued = outgoing.withLock { outgoing in
            guard outgoing.count < Self.outgoingLimit else { return false }
            outgoing.append(record)
            return true
        }
        if queued {
            outgoingWaitingInput.yield()
        } else {
            notAppended([record], because: "the realtime log's queue is full")
        }
    }

    /// Records that will not reach the log (its queue is full, or the service stops while the broker is away):
    /// emits are delivered on this instance only (without an offset), session records are lost.
    private func notAppended(_ records: [RealtimeRecord], because reason: String) {
        var emits = 0
        for record in records {
            guard let broadcast = record.broadcast else {
                RealtimeMetrics.sessionRecordsDropped.increment()
                continue
            }
            emits += 1
            RealtimeMetrics.logAppendFailures.increment()
            namespaces.withLock { $0[record.namespace] }?.deliver(
                RecoveryLedger.packets(broadcast.packet, attachments: broadcast.attachments), toRooms: broadcast.rooms,
                except: Set(broadcast.except), latestKey: broadcast.latestKey)
        }
        logger.warning(
            "records not appended to the realtime log: emits delivered on this instance only, sessions not recorded",
            metadata: ["reason": "\(reason)", "emits": "\(emits)", "sessions": "\(records.count - emits)"])
    }

    private func applyInPlace(_ record: RealtimeRecord) {
        let movedAway = logState.withLock { state in
            defer { state.nextLocalOffset += 1 }
            return apply(state.nextLocalOffset, record, to: &state)
        }
        movedAway?.moveAway()
    }

    /// Applies a record read from the log.
    package func apply(_ offset: Int64, _ record: RealtimeRecord) {
        let movedAway = logState.withLock { state in
            defer { state.resumeWaiters() }
            return apply(offset, record, to: &state)
        }
        movedAway?.moveAway()
    }

    /// Applies a record under the log lock (so a socket being restored sees either all of it or none); returns a
    /// local socket whose session moved to another instance.
    private func apply(_ offset: Int64, _ record: RealtimeRecord, to state: inout LogState) -> SocketIOSocket? {
        let namespace = namespaces.withLock { $0[record.namespace] }
        if let broadcast = record.broadcast {
            guard
                let packets = state.ledger.apply(
                    broadcast, namespace: record.namespace, at: record.at, offset: offset,
                    withOffset: configuration.recovery != nil, now: configuration.now()),
                state.caughtUp, let namespace
            else { return nil }
            namespace.deliver(
                packets, toRooms: broadcast.rooms, except: Set(broadcast.except), latestKey: broadcast.latestKey,
                offset: configuration.recovery == nil ? nil : offset)
            return nil
        }
        if let session = record.session {
            let moved = state.ledger.apply(
                session, namespace: record.namespace, origin: record.origin, at: record.at, offset: offset,
                now: configuration.now())
            guard moved, record.origin != instanceId, let namespace else { return nil }
            return namespace.sockets.first { $0.id == session.sid && $0.pid == session.pid }
        }
        state.ledger.skip(offset)
        if record.origin == instanceId && !state.caughtUp {
            state.caughtUp = true
            logger.info("realtime log read up to this instance's start", metadata: ["realtime.offset": "\(offset)"])
        }
        return nil
    }

    /// A client reconnecting with an offset this instance has not applied yet (it reads the log a little behind
    /// the instance the client came from) waits for it, up to ``SocketIORecoverySettings/catchUpWait``: else it
    /// would be refused recovery, or, connecting afresh, get again emits it already has.
    private func waitUntilApplied(_ offset: Int64) async {
        guard logState.withLock({ $0.ledger.head < offset }) else { return }
        let id = UUID()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    self.logState.withLock { state in
                        if state.ledger.head >= offset {
                            continuation.resume()
                        } else {
                            state.waiters[id] = (offset, continuation)
                        }
                    }
                }
            }
            let wait = (configuration.recovery ?? SocketIORecoverySettings()).catchUpWait
            group.addTask {
                try? await Task.sleep(for: wait)
                self.logState.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume()
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Reads the log and appends the queued records until ``finishAppending()`` (then the last ones are appended
    /// and reading stops) or cancellation; first appends this instance's start marker.
    package func runLog() async throws {
        guard let log else { return }
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask {
                try await log.run { offset, record in self.apply(offset, record) }
            }
            while true {
                do {
                    try await log.append([RealtimeRecord(origin: instanceId, namespace: "/", at: configuration.now())])
                    break
                } catch {
                    logger.warning(
                        "could not append the start marker to the realtime log", metadata: ["error": "\(error)"])
                    try await Task.sleep(for: .seconds(1))
                }
            }
            for await _ in outgoingWaiting { await appendQueued(to: log) }
            await appendQueued(to: log)
            group.cancelAll()
        }
    }

    /// Appends the queued records in order, in batches of up to ``batchSize``, one batch at a time (batches handed
    /// to the producer without waiting were measured to come out of order and twice on Tansu).
    private func appendQueued(to log: any RealtimeLog) async {
        while true {
            let records = outgoing.withLock { outgoing in
                let batch = Array(outgoing.prefix(Self.batchSize))
                outgoing.removeFirst(batch.count)
                return batch
            }
            guard !records.isEmpty else { return }
            do {
                try await log.append(records)
            } catch {
                // Back at the head of the queue, in order, and tried again a second later: delivering them here
                // instead would send them twice if the log did take them, and never to other instances.
                outgoing.withLock { $0.insert(contentsOf: records, at: 0) }
                logger.warning(
                    "the realtime log did not take \(records.count) records; trying again in 1 s",
                    metadata: ["error": "\(error)"])
                do {
                    try await Task.sleep(for: .seconds(1))
                } catch {
                    notAppended(outgoing.withLock { $0 }, because: "stopping while the log does not take records")
                    return
                }
            }
        }
    }

    /// Nothing more to append: the last queued records are appended, then ``runLog()`` may end.
    package func finishAppending() { outgoingWaitingInput.finish() }
}

/// What a reconnecting client sends in its CONNECT `auth` to recover: Socket.IO's `pid` and the offset of the last
/// emit it received (none if it received none since it connected: a departure from Socket.IO, which then cannot
/// recover).
struct RecoveryRequest {
    var pid: String
    var offset: Int64?

    init?(auth: JSONValue?) {
        guard let pid = auth?["pid"]?.stringValue, !pid.isEmpty else { return nil }
        self.pid = pid
        if let offset = auth?["offset"] {
            // As Socket.IO: an offset must be a string (ours, decimal); anything else is no recovery at all.
            guard let text = offset.stringValue, let parsed = Int64(text), parsed >= 0 else { return nil }
            self.offset = parsed
        }
    }
}
