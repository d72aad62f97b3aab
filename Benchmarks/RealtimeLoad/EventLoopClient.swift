import NIOCore
import NIOPosix

/// realtime-load's connections: the raw Socket.IO protocol over a WebSocket worked on a NIO event loop, with no
/// task per connection. On two cores the generator shares the machine with the server it measures, so what a
/// connection costs it is taken from the server: a WebSocket client with a task and async streams per connection
/// cost the generator as much CPU to open 10,000 connections as the server.
enum EventLoopClient {
    /// Where to connect: the host, the port and the request target of a `ws://` URL.
    struct Endpoint: Sendable {
        var host: String
        var port: Int
        var target: String

        /// Parses `ws://HOST:PORT/PATH?QUERY`; nil for anything else.
        init?(url: String) {
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

    /// What a connection reports: its CONNECT answer (or its failure), echoes' times, and its loss.
    struct Events: Sendable {
        var connected: @Sendable (any Channel) -> Void
        var failed: @Sendable () -> Void
        var lost: @Sendable () -> Void
        var echoed: @Sendable (_ sentAt: Int64) -> Void
    }

    /// Opens one connection; its handler reports through `events`.
    static func connect(to endpoint: Endpoint, group: any EventLoopGroup, events: Events) {
        ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Handler(endpoint: endpoint, events: events))
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
            .whenFailure { _ in events.failed() }
    }

    /// A masked WebSocket text frame carrying `text`, as a client must send it.
    static func textFrame(_ text: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        let payload = Array(text.utf8)
        var frame = allocator.buffer(capacity: payload.count + 8)
        frame.writeInteger(UInt8(0x81))  // FIN, text
        if payload.count < 126 {
            frame.writeInteger(UInt8(0x80 | payload.count))
        } else {
            frame.writeInteger(UInt8(0x80 | 126))
            frame.writeInteger(UInt16(payload.count))
        }
        let key = UInt32.random(in: .min ... .max)
        frame.writeInteger(key)
        for (index, byte) in payload.enumerated() {
            frame.writeInteger(byte ^ UInt8(truncatingIfNeeded: key >> (24 - 8 * (index & 3))))
        }
        return frame
    }

    final class Handler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private enum Stage { case upgrading, opening, connecting, connected }

        private let endpoint: Endpoint
        private let events: Events
        private var stage = Stage.upgrading
        private var received: ByteBuffer?

        init(endpoint: Endpoint, events: Events) {
            self.endpoint = endpoint
            self.events = events
        }

        func channelActive(context: ChannelHandlerContext) {
            let request =
                "GET \(endpoint.target) HTTP/1.1\r\nHost: \(endpoint.host):\(endpoint.port)\r\nUpgrade: websocket\r\n"
                + "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: request)), promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            if stage == .connected { events.lost() } else { events.failed() }
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
                send("40", context: context)
                stage = .connecting
            case .connecting:
                if text.hasPrefix("40") {
                    stage = .connected
                    events.connected(context.channel)
                } else if text == "2" {
                    send("3", context: context)
                }
            case .connected:
                if text == "2" {
                    send("3", context: context)
                } else if text.hasPrefix(#"42["message-back""#), let range = text.range(of: #""s":"#) {
                    let digits = text[range.upperBound...].prefix { $0.isNumber }
                    if let sentAt = Int64(digits) { events.echoed(sentAt) }
                }
            }
        }

        private func send(_ text: String, context: ChannelHandlerContext) {
            context.writeAndFlush(
                wrapOutboundOut(EventLoopClient.textFrame(text, allocator: context.channel.allocator)), promise: nil)
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
