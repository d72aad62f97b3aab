import Contracts
import Foundation
import Logging
import Synchronization

/// Socket.IO v5 on top of an ``EngineServer``: namespaces, connection authorization, events and
/// acknowledgements, rooms, and cross-instance fan-out through a ``RealtimeAdapter``.
package final class SocketIOServer: EngineHandler, Sendable {
    let logger: Logger
    /// Identifies this process in broadcasts, so it skips its own when they come back from the adapter.
    package let instanceId: String
    private let namespaces = Mutex<[String: SocketIONamespace]>([:])
    private let connections = Mutex<[String: SocketIOConnection]>([:])
    private let adapter: (any RealtimeAdapter)?
    let configuration: SocketIOConfiguration

    package init(
        configuration: SocketIOConfiguration = SocketIOConfiguration(), adapter: (any RealtimeAdapter)?, logger: Logger
    ) {
        self.configuration = configuration
        self.adapter = adapter
        self.logger = logger
        self.instanceId = UUID().uuidString
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

    package func serve(_ session: EngineSession) async {
        guard let connection = connections.withLock({ $0[session.id] }) else { return }
        await connection.serve()
    }

    package func receive(_ message: EngineMessage, from session: EngineSession) async throws(EngineProtocolError) {
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
        let socket = SocketIOSocket(
            id: EngineServer.makeSessionId(), namespace: namespace, user: credentials?.user,
            handshake: handshake, connection: connection
        )
        guard connection.attach(socket) else { throw EngineProtocolError("CONNECT twice to one namespace") }
        connection.session.claim()
        let answer = SocketIOPacket(
            type: .connect, namespace: namespace.name, data: .object(JSONObject([("sid", .string(socket.id))])))
        connection.send([EnginePacket(.message, answer.encoded)])
        await namespace.connected(socket)
        if let expiresAt = credentials?.expiresAt { socket.expire(at: expiresAt) }
    }

    private func refuse(_ namespace: String, _ refusal: SocketIOConnectRefusal, on connection: SocketIOConnection) {
        var fields: [(key: String, value: JSONValue)] = [("message", .string(refusal.message))]
        if let code = refusal.code {
            fields.append(("data", .object(JSONObject([("code", .string(code.rawValue))]))))
        }
        let packet = SocketIOPacket(type: .connectError, namespace: namespace, data: .object(JSONObject(fields)))
        connection.send([EnginePacket(.message, packet.encoded)])
    }

    // MARK: Cross-instance

    func publish(
        namespace: String, rooms: [String], except: Set<String>, packets: [EnginePacket], latestKey: String?
    ) async {
        guard let adapter else { return }
        var text = ""
        var attachments: [String] = []
        for packet in packets {
            switch packet.payload {
            case .text(let value): text = value
            case .binary(let bytes): attachments.append(Data(bytes).base64EncodedString())
            }
        }
        let broadcast = RealtimeBroadcast(
            origin: instanceId, namespace: namespace, rooms: rooms, except: Array(except), packet: text,
            attachments: attachments, latestKey: latestKey
        )
        do {
            try await adapter.publish(broadcast)
        } catch {
            logger.warning("could not publish a broadcast to other instances", metadata: ["error": "\(error)"])
        }
    }

    /// A broadcast from another instance: deliver it to the local sockets.
    package func deliver(_ broadcast: RealtimeBroadcast) {
        guard broadcast.origin != instanceId, let namespace = namespaces.withLock({ $0[broadcast.namespace] }) else {
            return
        }
        let packets =
            [EnginePacket(.message, broadcast.packet)]
            + broadcast.attachments.compactMap { Data(base64Encoded: $0).map { EnginePacket.binary(Array($0)) } }
        namespace.deliver(
            packets, toRooms: broadcast.rooms, except: Set(broadcast.except), latestKey: broadcast.latestKey)
    }
}
