import Foundation
import Logging
import NIOCore
import Synchronization

/// The Socket.IO side of one Engine.IO session: the sockets it opened per namespace, binary attachments being
/// collected, and the queue of packets its handlers work through in order. The queue is bounded in bytes
/// (``SocketIOConfiguration/inboundBacklogLimit``): a peer that sends faster than its packets are handled is
/// disconnected rather than buffered for.
///
/// The queue is worked through by one task at a time, started by the packet that finds it idle and ended when it is
/// empty: an idle connection holds no task. (A task keeps the stack it once needed, in slabs of about 1 KiB, until it
/// ends; a task per connection for its lifetime held about 5 KiB, issue 21.)
final class SocketIOConnection: Sendable {
    let session: EngineSession
    private let server: SocketIOServer

    private struct State {
        var sockets: [String: SocketIOSocket] = [:]
        /// Turns messages into packets, holding a binary packet until its attachments arrived.
        var assembler = SocketIOPacketAssembler()
        /// What the messages of the packet being assembled cost so far, in bytes.
        var partialCost = 0
        /// What the queued packets (and the partial one) cost, in bytes.
        var inboundBytes = 0
        /// Packets waiting for their handlers, in order. It starts with room for one and, drained after a burst,
        /// starts over: NIO's default of 16 held 1.7 KiB for every idle connection's life.
        var queue = Self.emptyQueue
        static var emptyQueue: CircularBuffer<SocketIOPacketWithAttachments> { CircularBuffer(initialCapacity: 1) }
        /// Whether a task is working through ``queue``.
        var working = false
        /// Who waits for the queue's task to end.
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }

    /// What one message costs while it waits: its bytes plus the bookkeeping around it.
    static let messageOverhead = 64

    private let state = Mutex(State())

    init(session: EngineSession, server: SocketIOServer) {
        self.session = session
        self.server = server
    }

    /// Sends packets to the client, counting them.
    /// - Parameter latestKey: replaces a pending packet with the same key (see ``EngineSession/send(_:latestKey:)``).
    func send(_ packets: [EnginePacket], latestKey: String? = nil) {
        RealtimeMetrics.packetsOut.increment(by: packets.count)
        session.send(packets, latestKey: latestKey)
    }

    /// The socket of this connection in `namespace`, if connected.
    func socket(in namespace: String) -> SocketIOSocket? { state.withLock { $0.sockets[namespace] } }

    var sockets: [SocketIOSocket] { state.withLock { Array($0.sockets.values) } }

    /// One Engine.IO message: a packet, or an attachment of the pending binary packet. Over the inbound limit the
    /// session closes (``EngineCloseReason/inboundBacklogFull``).
    func receive(_ message: EngineMessage) throws(EngineProtocolError) {
        RealtimeMetrics.packetsIn.increment()
        let cost: Int
        switch message {
        case .text(let text): cost = text.utf8.count + Self.messageOverhead
        case .binary(let bytes): cost = bytes.count + Self.messageOverhead
        }
        let admitted = state.withLock { state in
            guard state.inboundBytes == 0 || state.inboundBytes + cost <= server.configuration.inboundBacklogLimit
            else {
                return false
            }
            state.inboundBytes += cost
            return true
        }
        guard admitted else {
            RealtimeMetrics.inboundOverflows.increment()
            server.logger.info(
                "closing a connection whose packets arrive faster than they are handled",
                metadata: ["engine.sid": "\(session.id)", "engine.address": "\(session.clientAddress ?? "-")"])
            session.close(.inboundBacklogFull)
            return
        }
        let complete = try state.withLock { state throws(EngineProtocolError) -> SocketIOPacketWithAttachments? in
            state.partialCost += cost
            guard let complete = try state.assembler.receive(message) else { return nil }
            defer { state.partialCost = 0 }
            return SocketIOPacketWithAttachments(
                packet: complete.packet, attachments: complete.attachments, cost: state.partialCost)
        }
        if let complete {
            try dispatch(complete)
        }
    }

    /// Acknowledgements resolve at once (a handler may be waiting for one); everything else is queued in order. A
    /// DISCONNECT also marks its socket at once: should the transport close before the queue reaches it, the socket
    /// still counts as having left (its session is not kept for recovery).
    private func dispatch(_ item: SocketIOPacketWithAttachments) throws(EngineProtocolError) {
        if item.packet.type == .disconnect { socket(in: item.packet.namespace)?.markLeaving() }
        switch item.packet.type {
        case .ack, .binaryAck:
            handled(item)
            guard let socket = socket(in: item.packet.namespace), case .array(let values) = item.packet.data,
                let id = item.packet.ackId
            else { throw EngineProtocolError("ACK for a namespace not joined") }
            socket.receivedAck(id: id, arguments: SocketIOArguments(values, attachments: item.attachments))
        default:
            enqueue(item)
        }
    }

    /// Queues `item`, starting the task that works through the queue unless one is at it.
    private func enqueue(_ item: SocketIOPacketWithAttachments) {
        let start = state.withLock { state -> Bool in
            state.queue.append(item)
            guard !state.working else { return false }
            state.working = true
            return true
        }
        if start { Task { await self.work() } }
    }

    /// Works through the queue in order until it is empty. Once the session is gone only the disconnect hooks of
    /// detached sockets still run.
    private func work() async {
        while let item = nextItem() {
            handled(item)
            if item.detach == nil && session.isClosed { continue }
            do {
                try await server.handle(item, on: self)
            } catch {
                server.logger.debug("closing connection after a protocol error", metadata: ["error": "\(error)"])
                session.close(.protocolError)
            }
        }
    }

    /// The next queued item; nil, with the queue's task marked ended and its waiters resumed, when there is none.
    private func nextItem() -> SocketIOPacketWithAttachments? {
        let (item, waiters) = state.withLock {
            state -> (SocketIOPacketWithAttachments?, [CheckedContinuation<Void, Never>]) in
            if let item = state.queue.popFirst() { return (item, []) }
            if state.queue.capacity > 2 { state.queue = State.emptyQueue }
            state.working = false
            defer { state.idleWaiters = [] }
            return (nil, state.idleWaiters)
        }
        for waiter in waiters { waiter.resume() }
        return item
    }

    /// Returns once no task works through the queue.
    private func untilWorkIsDone() async {
        await withCheckedContinuation { continuation in
            let idle = state.withLock { state -> Bool in
                guard state.working else { return true }
                state.idleWaiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }

    /// The item left the queue: its bytes no longer count.
    private func handled(_ item: SocketIOPacketWithAttachments) {
        guard item.cost > 0 else { return }
        state.withLock { $0.inboundBytes = max(0, $0.inboundBytes - item.cost) }
    }

    func attach(_ socket: SocketIOSocket) -> Bool {
        state.withLock { state in
            guard state.sockets[socket.namespace.name] == nil else { return false }
            state.sockets[socket.namespace.name] = socket
            return true
        }
    }

    /// Removes the socket and tells its namespace (runs the disconnect hooks in the background of the work queue).
    func detach(_ socket: SocketIOSocket, reason: SocketIODisconnectReason) {
        let removed = state.withLock { $0.sockets.removeValue(forKey: socket.namespace.name) != nil }
        if removed { enqueue(SocketIOPacketWithAttachments(detach: socket, reason: reason)) }
    }

    /// The session ended: every socket leaves its namespace.
    /// Runs once the queue's work is done, so the disconnect hooks come after every packet's handler.
    func closed(reason: EngineCloseReason) async {
        await untilWorkIsDone()
        let sockets = state.withLock { state in
            defer { state.sockets.removeAll() }
            return Array(state.sockets.values)
        }
        for socket in sockets {
            await socket.namespace.disconnected(
                socket, reason: socket.isLeaving ? .clientNamespaceDisconnect : SocketIODisconnectReason(reason))
        }
    }

    /// The Engine.IO packets of an event: the Socket.IO packet, then its binary attachments.
    static func eventPackets(namespace: String, event: String, arguments: SocketIOArguments, ackId: Int?)
        -> [EnginePacket]
    {
        let binary = !arguments.attachments.isEmpty
        let packet = SocketIOPacket(
            type: binary ? .binaryEvent : .event, namespace: namespace, ackId: ackId,
            data: .array([.string(event)] + arguments.values), attachmentCount: arguments.attachments.count
        )
        return [EnginePacket(.message, packet.encoded)] + arguments.attachments.map { EnginePacket.binary($0) }
    }
}

/// A decoded packet with its attachments, or a request to detach a socket, in a connection's work queue.
struct SocketIOPacketWithAttachments: Sendable {
    var packet: SocketIOPacket
    var attachments: [[UInt8]]
    var detach: (socket: SocketIOSocket, reason: SocketIODisconnectReason)?
    /// What it counts against the inbound limit while queued.
    var cost = 0

    init(packet: SocketIOPacket, attachments: [[UInt8]], cost: Int) {
        self.packet = packet
        self.attachments = attachments
        self.cost = cost
    }

    init(detach socket: SocketIOSocket, reason: SocketIODisconnectReason) {
        self.packet = SocketIOPacket(type: .disconnect, namespace: socket.namespace.name)
        self.attachments = []
        self.detach = (socket, reason)
    }
}
