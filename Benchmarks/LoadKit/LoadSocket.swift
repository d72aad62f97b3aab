import NIOCore
import NIOPosix
import Synchronization

/// The load generators' Socket.IO client: the raw protocol over a WebSocket worked by a handler on a NIO event loop,
/// with no task or async stream per connection. On two cores a generator shares the machine with what it measures:
/// a WebSocket client with a task and async streams per connection cost realtime-load as much CPU to open 10,000
/// connections as the server, and each packet crossed threads twice before it was timed.
///
/// Packets reach `packet` on the event loop, in order: a recovered session's missed emits before the CONNECT answer,
/// then everything after it. Pings are answered here.
package final class LoadSocket: Sendable {
    /// Where to connect: the host, the port and the request target of a `ws://` URL.
    package struct Endpoint: Sendable {
        package var host: String
        package var port: Int
        package var target: String

        /// Parses `ws://HOST:PORT/PATH?QUERY`; nil for anything else.
        package init?(url: String) {
            guard url.hasPrefix("ws://") else { return nil }
            let rest = url.dropFirst("ws://".count)
            let authority = rest.prefix { $0 != "/" }
            let parts = authority.split(separator: ":")
            guard parts.count == 2, let port = Int(parts[1]) else { return nil }
            host = String(parts[0])
            self.port = port
            target = rest.count > authority.count ? String(rest.dropFirst(authority.count)) : "/"
        }
    }

    /// What a connection reports, each on its event loop.
    package struct Handlers: Sendable {
        /// The server accepted the CONNECT: its answer (`40<namespace>,{"sid":…,"pid":…}`) and when it arrived.
        package var connected: @Sendable (LoadSocket, _ answer: String, _ at: ContinuousClock.Instant) -> Void
        /// A packet other than a ping, the CONNECT answer or an awaited acknowledgement.
        package var packet: @Sendable (LoadSocket, String) -> Void = { _, _ in }
        /// The connection ended; `connected` says whether the CONNECT had been accepted.
        package var ended: @Sendable (_ connected: Bool) -> Void = { _ in }

        package init(
            connected: @escaping @Sendable (LoadSocket, String, ContinuousClock.Instant) -> Void,
            packet: @escaping @Sendable (LoadSocket, String) -> Void = { _, _ in },
            ended: @escaping @Sendable (Bool) -> Void = { _ in }
        ) {
            self.connected = connected
            self.packet = packet
            self.ended = ended
        }
    }

    /// The connection's channel.
    package let channel: any Channel
    /// `/chat,` for `/chat`, empty for the main namespace: what follows a packet's type digits.
    let namespacePrefix: String
    private let acknowledgements = Mutex<[Int: CheckedContinuation<String?, Never>]>([:])

    init(channel: any Channel, namespace: String) {
        self.channel = channel
        namespacePrefix = namespace == "/" ? "" : namespace + ","
    }

    /// Opens a connection to `endpoint` and connects to `namespace` with the `auth` object (JSON), if any; reports
    /// through `handlers`. A failure before the CONNECT was accepted is reported as `ended(false)`.
    package static func open(
        _ endpoint: Endpoint, namespace: String, auth: String?,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        handlers: Handlers
    ) {
        ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let socket = LoadSocket(channel: channel, namespace: namespace)
                    let handler = Handler(endpoint: endpoint, socket: socket, auth: auth, handlers: handlers)
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
            .whenFailure { _ in handlers.ended(false) }
    }

    /// A connection the server accepted.
    package struct Accepted: Sendable {
        package var socket: LoadSocket
        /// The CONNECT answer: `40<namespace>,{"sid":…,"pid":…}`.
        package var answer: String
        /// When the answer arrived.
        package var at: ContinuousClock.Instant
    }

    /// Opens a connection to `url` and connects to `namespace`; returns it once accepted, or nil if the server
    /// refused or the connection failed. Later packets go to `packet`.
    package static func connect(
        url: String, namespace: String, auth: String?,
        packet: @escaping @Sendable (LoadSocket, String) -> Void = { _, _ in }
    ) async -> Accepted? {
        guard let endpoint = Endpoint(url: url) else { return nil }
        let outcome = Mutex<CheckedContinuation<Accepted?, Never>?>(nil)
        return await withCheckedContinuation { continuation in
            outcome.withLock { $0 = continuation }
            open(
                endpoint, namespace: namespace, auth: auth,
                handlers: Handlers(
                    connected: { socket, answer, at in
                        outcome.withLock { $0.take() }?.resume(
                            returning: Accepted(socket: socket, answer: answer, at: at))
                    },
                    packet: packet,
                    ended: { _ in outcome.withLock { $0.take() }?.resume(returning: nil) }
                ))
        }
    }

    /// The CONNECT `auth` object carrying `token`, as the apps send it.
    package static func auth(token: String) -> String { #"{"token":"\#(token)"}"# }

    /// The value of the string field `name` in a packet's JSON (the first one), or nil.
    package static func field(_ name: String, in text: String) -> String? {
        guard let range = text.range(of: #""\#(name)":""#) else { return nil }
        return String(text[range.upperBound...].prefix { $0 != "\"" })
    }

    /// Sends `text` as one text frame.
    package func send(_ text: String) {
        channel.writeAndFlush(Self.textFrame(text, allocator: channel.allocator), promise: nil)
    }

    /// Sends event `text` (a whole packet carrying acknowledgement id `id`) and waits for its acknowledgement: the
    /// packet `43<namespace>,<id>[…]`, or nil if the connection ends first.
    /// Cancelling the task closes the connection.
    package func call(_ text: String, id: Int) async -> String? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                acknowledgements.withLock { $0[id] = continuation }
                if !channel.isActive {
                    acknowledgements.withLock { $0.removeValue(forKey: id) }?.resume(returning: nil)
                }
                send(text)
            }
        } onCancel: {
            close()
        }
    }

    /// Closes the connection.
    package func close() { channel.close(promise: nil) }

    /// Returns when the connection has ended; cancelling the task closes it.
    package func ended() async {
        await withTaskCancellationHandler {
            try? await channel.closeFuture.get()
        } onCancel: {
            close()
        }
    }

    /// Resumes the call waiting for `text` if it is an acknowledgement one is waiting for.
    fileprivate func answered(_ text: String) -> Bool {
        let prefix = "43" + namespacePrefix
        guard text.hasPrefix(prefix), let id = Int(text.dropFirst(prefix.count).prefix { $0.isNumber }),
            let waiting = acknowledgements.withLock({ $0.removeValue(forKey: id) })
        else { return false }
        waiting.resume(returning: text)
        return true
    }

    /// Resumes every waiting call with nil: the connection ended.
    fileprivate func abandonCalls() {
        let waiting = acknowledgements.withLock { pending in
            defer { pending = [:] }
            return Array(pending.values)
        }
        for call in waiting { call.resume(returning: nil) }
    }

    /// A masked WebSocket text frame carrying `text`, as a client must send it.
    package static func textFrame(_ text: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        let payload = Array(text.utf8)
        var frame = allocator.buffer(capacity: payload.count + 14)
        frame.writeInteger(UInt8(0x81))  // FIN, text
        if payload.count < 126 {
            frame.writeInteger(UInt8(0x80 | payload.count))
        } else if payload.count <= Int(UInt16.max) {
            frame.writeInteger(UInt8(0x80 | 126))
            frame.writeInteger(UInt16(payload.count))
        } else {
            frame.writeInteger(UInt8(0x80 | 127))
            frame.writeInteger(UInt64(payload.count))
        }
        let key = UInt32.random(in: .min ... .max)
        frame.writeInteger(key)
        for (index, byte) in payload.enumerated() {
            frame.writeInteger(byte ^ UInt8(truncatingIfNeeded: key >> (24 - 8 * (index & 3))))
        }
        return frame
    }

    /// The raw upgrade, then the Engine.IO open packet, the Socket.IO CONNECT and its answer, then packets.
    final class Handler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private enum Stage { case upgrading, opening, connecting, connected }

        private let endpoint: Endpoint
        private let socket: LoadSocket
        private let auth: String?
        private let handlers: Handlers
        private var stage = Stage.upgrading
        private var received: ByteBuffer?

        init(endpoint: Endpoint, socket: LoadSocket, auth: String?, handlers: Handlers) {
            self.endpoint = endpoint
            self.socket = socket
            self.auth = auth
            self.handlers = handlers
        }

        func channelActive(context: ChannelHandlerContext) {
            let request =
                "GET \(endpoint.target) HTTP/1.1\r\nHost: \(endpoint.host):\(endpoint.port)\r\nUpgrade: websocket\r\n"
                + "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: request)), promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            socket.abandonCalls()
            handlers.ended(stage == .connected)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var incoming = unwrapInboundIn(data)
            if received == nil || received!.readableBytes == 0 {
                received = incoming
            } else {
                received!.writeBuffer(&incoming)
            }
            if stage == .upgrading {
                guard let headEnd = received!.readableBytesView.firstRange(of: [13, 10, 13, 10]) else { return }
                guard received!.readString(length: 12) == "HTTP/1.1 101" else { return context.close(promise: nil) }
                received!.moveReaderIndex(to: headEnd.upperBound)
                stage = .opening
            }
            while let (opcode, text) = Self.nextFrame(&received!) {
                guard opcode == 1 else {
                    if opcode == 8 { context.close(promise: nil) }
                    continue
                }
                handle(text, context: context)
            }
            received!.discardReadBytes()
        }

        private func handle(_ text: String, context: ChannelHandlerContext) {
            switch stage {
            case .upgrading:
                break
            case .opening:
                guard text.hasPrefix("0") else { return context.close(promise: nil) }
                socket.send("40" + socket.namespacePrefix + (auth ?? ""))
                stage = .connecting
            case .connecting:
                if text == "2" {
                    socket.send("3")
                } else if text.hasPrefix("40" + socket.namespacePrefix) {
                    stage = .connected
                    handlers.connected(socket, text, .now)
                } else if text.hasPrefix("44" + socket.namespacePrefix) {
                    context.close(promise: nil)
                } else {
                    handlers.packet(socket, text)
                }
            case .connected:
                if text == "2" {
                    socket.send("3")
                } else if !socket.answered(text) {
                    handlers.packet(socket, text)
                }
            }
        }

        /// The next whole frame in `buffer` (a server's frames are not masked): its opcode and text.
        private static func nextFrame(_ buffer: inout ByteBuffer) -> (UInt8, String)? {
            let start = buffer.readerIndex
            guard let first = buffer.getInteger(at: start, as: UInt8.self),
                let second = buffer.getInteger(at: start + 1, as: UInt8.self)
            else { return nil }
            var length = Int(second & 0x7F)
            var header = 2
            if length == 126 {
                guard let extended = buffer.getInteger(at: start + 2, as: UInt16.self) else { return nil }
                length = Int(extended)
                header = 4
            } else if length == 127 {
                guard let extended = buffer.getInteger(at: start + 2, as: UInt64.self) else { return nil }
                length = Int(extended)
                header = 10
            }
            guard buffer.readableBytes >= header + length,
                let text = buffer.getString(at: start + header, length: length)
            else { return nil }
            buffer.moveReaderIndex(forwardBy: header + length)
            return (first & 0x0F, text)
        }
    }
}
