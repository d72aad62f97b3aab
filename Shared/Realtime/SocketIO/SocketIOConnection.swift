import Foundation
import Logging
import Synchronization

/// The Socket.IO side of one Engine.IO session: the sockets it opened per namespace, binary attachments being
/// collected, and the queue of packets its handlers work through in order.
final class SocketIOConnection: Sendable {
    let session: EngineSession
    private let server: SocketIOServer
    private let work: AsyncStream<SocketIOPacketWithAttachments>.Continuation
    let workQueue: AsyncStream<SocketIOPacketWithAttachments>

    private struct State {
        var sockets: [String: SocketIOSocket] = [:]
        var assembler = SocketIOPacketAssembler()
    }

    private let state = Mutex(State())

    init(session: EngineSession, server: SocketIOServer) {
        self.session = session
        self.server = server
        (workQueue, work) = AsyncStream.makeStream(of: SocketIOPacketWithAttachments.self)
        let work = self.work
        session.onClose { work.finish() }
    }

    /// Sends packets to the client, counting them.
    func send(_ packets: [EnginePacket]) {
        RealtimeMetrics.packetsOut.increment(by: packets.count)
        session.send(packets)
    }

    /// The socket of this connection in `namespace`, if connected.
    func socket(in namespace: String) -> SocketIOSocket? { state.withLock { $0.sockets[namespace] } }

    var sockets: [SocketIOSocket] { state.withLock { Array($0.sockets.values) } }

    /// One Engine.IO message: a packet, or an attachment of the pending binary packet.
    func receive(_ message: EngineMessage) throws(EngineProtocolError) {
        RealtimeMetrics.packetsIn.increment()
        let complete = try state.withLock { state throws(EngineProtocolError) in try state.assembler.receive(message) }
        if let complete {
            try dispatch(SocketIOPacketWithAttachments(packet: complete.packet, attachments: complete.attachments))
        }
    }

    /// Acknowledgements resolve at once (a handler may be waiting for one); everything else is queued in order.
    private func dispatch(_ item: SocketIOPacketWithAttachments) throws(EngineProtocolError) {
        switch item.packet.type {
        case .ack, .binaryAck:
            guard let socket = socket(in: item.packet.namespace), case .array(let values) = item.packet.data,
                let id = item.packet.ackId
            else { throw EngineProtocolError("ACK for a namespace not joined") }
            socket.receivedAck(id: id, arguments: SocketIOArguments(values, attachments: item.attachments))
        default:
            work.yield(item)
        }
    }

    /// Works through the queued packets until the session closes.
    func serve() async {
        for await item in workQueue {
            do {
                try await server.handle(item, on: self)
            } catch {
                server.logger.debug("closing connection after a protocol error", metadata: ["error": "\(error)"])
                session.close(.protocolError)
                return
            }
        }
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
        if removed { work.yield(SocketIOPacketWithAttachments(detach: socket, reason: reason)) }
    }

    /// The session ended: every socket leaves its namespace.
    func closed(reason: EngineCloseReason) async {
        work.finish()
        let sockets = state.withLock { state in
            defer { state.sockets.removeAll() }
            return Array(state.sockets.values)
        }
        for socket in sockets {
            await socket.namespace.disconnected(socket, reason: SocketIODisconnectReason(reason))
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

    init(packet: SocketIOPacket, attachments: [[UInt8]]) {
        self.packet = packet
        self.attachments = attachments
    }

    init(detach socket: SocketIOSocket, reason: SocketIODisconnectReason) {
        self.packet = SocketIOPacket(type: .disconnect, namespace: socket.namespace.name)
        self.attachments = []
        self.detach = (socket, reason)
    }
}
