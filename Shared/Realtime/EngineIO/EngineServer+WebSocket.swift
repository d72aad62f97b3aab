import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOWebSocket

/// Engine.IO over WebSocket: which upgrades a server takes, and what serves the connection after the upgrade.
extension EngineServer {
    /// Whether the client behind `peer` (and the proxy headers) holds as many sessions as it may.
    func atSessionLimit(peer: SocketAddress?, headers: HTTPFields) -> Bool {
        guard let limit = configuration.maxSessionsPerAddress,
            let address = configuration.trustedProxies.clientAddress(peer: peer, headers: Self.headerValues(headers))
        else { return false }
        return sessions.withLock { $0.perAddress[address, default: 0] >= limit }
    }

    /// Header values by lower-cased name (the last of repeated fields wins).
    static func headerValues(_ headers: HTTPFields) -> [String: String] {
        var values: [String: String] = [:]
        for field in headers { values[field.name.canonicalName] = field.value }
        return values
    }

    /// What a WebSocket upgrade request for `target` (with `headers`, arriving on `channel`) gets from this server;
    /// nil if the path is not its own. A refusal is answered with an empty 400.
    func webSocketUpgrade(target: String, headers: HTTPFields, channel: any Channel) -> EngineWebSocketUpgrade? {
        guard Self.pathMatches(target, configuration.path) else { return nil }
        let query = Self.query(of: target.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init) ?? "")
        guard query["EIO"] == "4", query["transport"] == "websocket" else { return .refuse }
        if let sid = query["sid"] {
            guard let session = sessions.withLock({ $0.byId[sid] }) else { return .refuse }
            // Another WebSocket for a session already upgraded, or upgrading: accepted and closed at once, as the
            // reference server does, and the session goes on undisturbed.
            guard !session.isWebSocket, session.upgradeState == .none else { return .acceptAndClose(self) }
            return .upgradeSession(self, session)
        }
        // A starting instance, or a client with too many sessions. (A WebSocket request without upgrade headers gets
        // the protocol's error from `respond(to:context:)`.)
        if !handler.acceptsSessions || atSessionLimit(peer: channel.remoteAddress, headers: headers) {
            return .refuse
        }
        return .openSession(self, query: query, headers: headers)
    }

    /// The role of a connection just upgraded for `upgrade`: a new session on it (or a refusal, when the check in
    /// `webSocketUpgrade` was raced past), the upgrade of a polling session, or a socket closed at once.
    func webSocketRole(for upgrade: EngineWebSocketUpgrade, writer: any EngineWebSocketWriter, peer: SocketAddress?)
        -> EngineWebSocketHandler.Role
    {
        switch upgrade {
        case .refuse, .acceptAndClose:
            return .closing
        case .upgradeSession(_, let session):
            return .upgrading(session, probed: false)
        case .openSession(_, let query, let headers):
            guard
                case .success(let session) = openSession(
                    query: query, headers: headers, peer: peer, transport: .webSocket(writer))
            else { return .refused(reason: "Too many sessions from this address") }
            session.send([openPacket(for: session, upgrades: [])])
            return .session(session)
        }
    }
}

/// What an Engine.IO server answers to a WebSocket upgrade request.
enum EngineWebSocketUpgrade: Sendable {
    /// Not upgraded: an empty 400.
    case refuse
    /// A session that starts on WebSocket.
    case openSession(EngineServer, query: [String: String], headers: HTTPFields)
    /// The upgrade of a polling session: `2probe`/`3probe`, then `5`.
    case upgradeSession(EngineServer, EngineSession)
    /// Upgraded, then closed at once (a second WebSocket for an upgraded session).
    case acceptAndClose(EngineServer)

    var server: EngineServer? {
        switch self {
        case .refuse: nil
        case .openSession(let server, _, _), .upgradeSession(let server, _), .acceptAndClose(let server): server
        }
    }
}

/// Serves one Engine.IO WebSocket on its event loop, with no task: frames are read and answered by the channel
/// pipeline, a session's packets are written when it wakes the handler (``EngineWebSocketWriter``), and messages go
/// to the Engine.IO server as they complete. (A task per connection kept the deepest stack it had needed for the
/// connection's life, about 20 KiB with Hummingbird's WebSocket handler; issue 21.)
///
/// Its mutable state is touched only on the channel's event loop; `packetsWaiting` and `abort` may be called from
/// any thread and hop there.
final class EngineWebSocketHandler: ChannelInboundHandler, EngineWebSocketWriter, @unchecked Sendable {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    /// What the connection is for.
    enum Role {
        /// The transport of a session that started on it.
        case session(EngineSession)
        /// Upgrading a polling session: waiting for `2probe`, then (probed) for `5`.
        case upgrading(EngineSession, probed: Bool)
        /// A session could not be opened: the socket closes with a policy violation.
        case refused(reason: String)
        /// Nothing more to do but close.
        case closing
    }

    private let server: EngineServer
    private let channel: any Channel
    private var role: Role = .closing
    private var context: ChannelHandlerContext?
    /// The message being assembled from fragments, and whether it is text.
    private var fragments: (buffer: ByteBuffer, isText: Bool)?
    private var closeSent = false
    private var timer: Scheduled<Void>?

    /// How long the peer has to answer the server's close frame before the socket is closed anyway.
    static let closeTimeout: TimeAmount = .seconds(5)

    init(server: EngineServer, channel: any Channel) {
        self.server = server
        self.channel = channel
    }

    /// Takes up its role once in the pipeline (on the event loop).
    func start(_ role: Role) {
        self.role = role
        guard context != nil else { return }
        switch role {
        case .session: break
        case .upgrading:
            // An upgrade that stalls is abandoned.
            timer = channel.eventLoop.scheduleTask(in: TimeAmount(server.configuration.upgradeTimeout)) { [self] in
                abandonUpgrade()
                sendClose(.policyViolation, reason: "upgrade timeout")
            }
        case .refused(let reason): sendClose(.policyViolation, reason: reason)
        case .closing: sendClose(.normalClosure)
        }
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) { ended(.transportClose) }

    // MARK: EngineWebSocketWriter

    func packetsWaiting() {
        channel.eventLoop.execute { self.writePackets() }
    }

    func abort() { channel.close(promise: nil) }

    /// Writes what the session has queued, until it says idle; ends the socket once the session finished. The
    /// packets' bytes count against the session's outbound limit until the socket took them.
    private func writePackets() {
        guard let context, !closeSent, case .session(let session) = role else { return }
        while true {
            switch session.takeWebSocketBatch() {
            case .packets(let packets):
                var bytes = 0
                let written = context.eventLoop.makePromise(of: Void.self)
                for (index, packet) in packets.enumerated() {
                    bytes += packet.byteCount
                    let frame =
                        switch packet.payload {
                        case .text:
                            WebSocketFrame(
                                fin: true, opcode: .text, data: ByteBuffer(string: packet.webSocketText ?? ""))
                        case .binary(let payload):
                            WebSocketFrame(fin: true, opcode: .binary, data: ByteBuffer(bytes: payload))
                        }
                    context.write(wrapOutboundOut(frame), promise: index == packets.count - 1 ? written : nil)
                }
                written.futureResult.whenComplete { [bytes] result in
                    session.webSocketWrote(bytes)
                    if case .failure = result { session.close(.transportError) }
                }
            case .idle:
                context.flush()
                return
            case .finished:
                context.flush()
                sendClose(.normalClosure)
                return
            }
        }
    }

    // MARK: Reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard !closeSent else {
            // The peer's answer to our close frame ends the connection.
            if frame.opcode == .connectionClose { context.close(promise: nil) }
            return
        }
        guard !frame.rsv1, !frame.rsv2, !frame.rsv3 else { return fail(.protocolError) }
        switch frame.opcode {
        case .text, .binary:
            guard fragments == nil else { return fail(.protocolError) }
            guard frame.length <= server.configuration.maxPayload else { return fail(.messageTooLarge) }
            if frame.fin {
                received(frame.unmaskedData, isText: frame.opcode == .text)
            } else {
                fragments = (frame.unmaskedData, frame.opcode == .text)
            }
        case .continuation:
            guard var partial = fragments else { return fail(.protocolError) }
            fragments = nil
            guard partial.buffer.readableBytes + frame.length <= server.configuration.maxPayload else {
                return fail(.messageTooLarge)
            }
            var data = frame.unmaskedData
            partial.buffer.writeBuffer(&data)
            if frame.fin {
                received(partial.buffer, isText: partial.isText)
            } else {
                fragments = partial
            }
        case .ping:
            guard frame.fin else { return fail(.protocolError) }
            let pong = WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .pong:
            break
        case .connectionClose:
            // The peer closes: answer (1000, or 1002 for a code a peer may not send), then end the connection.
            ended(.transportClose)
            sendClose(Self.closeAnswer(to: frame.unmaskedData))
            context.close(promise: nil)
        default:
            fail(.protocolError)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed = event as? ChannelEvent {
            // The peer half-closed: nothing more will come, so the session's transport is gone.
            ended(.transportClose)
            context.close(promise: nil)
        } else if event is ChannelShouldQuiesceEvent {
            // The HTTP server stops, and waits for this channel to close. A session flushes what it queued first.
            if case .session(let session) = role {
                session.close(.serverShutdown)
            } else {
                ended(.serverShutdown)
                sendClose(.goingAway)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        ended(.transportClose)
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    /// A frame the decoder refused (too long, unmasked, a bad length) is answered with a close frame carrying its
    /// code before the socket closes, as NIO's `WebSocketProtocolErrorHandler` would without a handler of its own in
    /// every connection's pipeline; any other error closes the socket.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let error = error as? NIOWebSocketError, !closeSent else {
            ended(.transportError)
            context.close(promise: nil)
            return
        }
        ended(.protocolError)
        writeClose(error == .invalidFrameLength ? .messageTooLarge : .protocolError, reason: nil, context: context)
            .whenComplete { [channel] _ in channel.close(promise: nil) }
    }

    /// A whole message from the peer.
    private func received(_ data: ByteBuffer, isText: Bool) {
        let message: EngineMessage
        if isText {
            guard let text = String(validating: data.readableBytesView, as: UTF8.self) else {
                return fail(.dataInconsistentWithMessage)
            }
            message = .text(text)
        } else {
            message = .binary(Array(data.readableBytesView))
        }
        switch role {
        case .session(let session):
            let packet: EnginePacket
            switch message {
            case .text(let text):
                guard let decoded = try? EnginePacket.decode(text: text[...], allowBase64: false) else {
                    session.close(.protocolError)
                    return
                }
                packet = decoded
            case .binary(let bytes):
                packet = .binary(bytes)
            }
            // A packet that ends the session leaves the writer to flush what is queued and close the socket.
            guard !session.isClosed else { return }
            _ = server.handle(packet, from: session)
        case .upgrading(let session, probed: false):
            // Another WebSocket of the session probed first: it is the one upgrading; leave it be.
            guard message == .text("2probe"), session.beginUpgrade() else {
                role = .closing
                return sendClose(.normalClosure)
            }
            role = .upgrading(session, probed: true)
            let answer = WebSocketFrame(fin: true, opcode: .text, data: channel.allocator.buffer(string: "3probe"))
            context?.writeAndFlush(wrapOutboundOut(answer), promise: nil)
        case .upgrading(let session, probed: true):
            guard message == .text("5") else {
                abandonUpgrade()
                return sendClose(.normalClosure)
            }
            timer?.cancel()
            timer = nil
            role = .session(session)
            session.completeUpgrade(writer: self)
            // A session that closed during the probe has nothing to take over: this ends the socket at once.
            writePackets()
        case .refused, .closing:
            break
        }
    }

    /// A WebSocket that began an upgrade (its probe answered) and went no further: the session stays on polling.
    private func abandonUpgrade() {
        if case .upgrading(let session, probed: true) = role { session.cancelUpgrade() }
        role = .closing
    }

    /// The connection is over for the session: it closes (a no-op if it already has), or a begun upgrade is undone.
    private func ended(_ reason: EngineCloseReason) {
        switch role {
        case .session(let session): session.close(reason)
        case .upgrading: abandonUpgrade()
        case .refused, .closing: break
        }
        role = .closing
    }

    /// A protocol violation at the WebSocket level: the session ends and the socket closes with `code`.
    private func fail(_ code: WebSocketErrorCode) {
        fragments = nil
        ended(.protocolError)
        sendClose(code)
    }

    /// The code that answers a peer's close frame with `payload`: 1000 when it has no code or one a peer may send
    /// (RFC 6455 7.4), otherwise 1002.
    static func closeAnswer(to payload: ByteBuffer) -> WebSocketErrorCode {
        guard payload.readableBytes > 0 else { return .normalClosure }
        guard payload.readableBytes >= 2, let code = payload.getInteger(at: payload.readerIndex, as: UInt16.self),
            (1000...1003).contains(code) || (1007...1011).contains(code) || (3000...4999).contains(code)
        else { return .protocolError }
        return .normalClosure
    }

    /// Sends a close frame (once) and closes the socket when the peer answers, or after ``closeTimeout``.
    private func sendClose(_ code: WebSocketErrorCode, reason: String? = nil) {
        guard let context, !closeSent else { return }
        writeClose(code, reason: reason, context: context)
        timer?.cancel()
        timer = context.eventLoop.scheduleTask(in: Self.closeTimeout) { [channel] in channel.close(promise: nil) }
    }

    /// Writes the one close frame this connection sends, with `code` and an optional reason.
    private func writeClose(_ code: WebSocketErrorCode, reason: String?, context: ChannelHandlerContext)
        -> EventLoopFuture<Void>
    {
        closeSent = true
        var data = context.channel.allocator.buffer(capacity: 2 + (reason?.utf8.count ?? 0))
        data.write(webSocketErrorCode: code)
        if let reason { data.writeString(reason) }
        return context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)))
    }
}
