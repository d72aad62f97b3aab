import HummingbirdWSClient
import Logging
import NIOCore

/// A raw WebSocket client for protocol tests: frames in arrive in a queue, frames out are sent in order.
public final class TestWebSocket: Sendable {
    /// A frame from the server, or the end of the connection.
    public enum Frame: Sendable, Equatable {
        case text(String)
        case binary([UInt8])
        /// The connection closed (or was refused).
        case closed
    }

    enum Command: Sendable {
        case text(String)
        case binary([UInt8])
        case close
    }

    private let frames: AsyncQueue<Frame>
    private let commands: AsyncStream<Command>.Continuation

    init(frames: AsyncQueue<Frame>, commands: AsyncStream<Command>.Continuation) {
        self.frames = frames
        self.commands = commands
    }

    /// Sends a text frame.
    public func send(_ text: String) { commands.yield(.text(text)) }
    /// Sends a binary frame.
    public func send(binary bytes: [UInt8]) { commands.yield(.binary(bytes)) }
    /// Closes the connection (a close frame with 1000).
    public func close() { commands.yield(.close) }

    /// The next frame, `.closed` once the connection is gone.
    public func next(timeout: Duration = .seconds(3)) async throws -> Frame {
        try await frames.next(timeout: timeout) ?? .closed
    }

    /// The next frame that is not an Engine.IO ping (`2`).
    public func nextSkippingPings(timeout: Duration = .seconds(3)) async throws -> Frame {
        while true {
            let frame = try await next(timeout: timeout)
            if frame != .text("2") { return frame }
        }
    }

    /// Waits until the server closes the connection, ignoring frames before that.
    public func expectClose(timeout: Duration = .seconds(3)) async throws {
        while try await next(timeout: timeout) != .closed {}
    }
}

/// Opens a WebSocket to `url` for the duration of `body`.
/// - Parameter answerPings: answer Engine.IO pings (`2`) with pongs (`3`) and do not queue them, so a slow
///   (loaded) test never loses its session to the heartbeat.
public func withTestWebSocket<Result: Sendable>(
    _ url: String, answerPings: Bool = false, _ body: @Sendable (TestWebSocket) async throws -> Result
) async throws -> Result {
    let frames = AsyncQueue<TestWebSocket.Frame>()
    let (commands, commandSink) = AsyncStream.makeStream(of: TestWebSocket.Command.self)
    let socket = TestWebSocket(frames: frames, commands: commandSink)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            var logger = Logger(label: "test-websocket")
            logger.logLevel = .critical
            do {
                try await WebSocketClient.connect(
                    url: url, configuration: .init(maxFrameSize: 4 << 20, autoPing: .disabled), logger: logger
                ) { inbound, outbound, _ in
                    try await withThrowingTaskGroup(of: Void.self) { connection in
                        connection.addTask {
                            for await command in commands {
                                switch command {
                                case .text(let text): try await outbound.write(.text(text))
                                case .binary(let bytes): try await outbound.write(.binary(ByteBuffer(bytes: bytes)))
                                case .close:
                                    try await outbound.close(.normalClosure, reason: nil)
                                    return
                                }
                            }
                        }
                        for try await message in inbound.messages(maxSize: 8 << 20) {
                            switch message {
                            case .text("2") where answerPings: commandSink.yield(.text("3"))
                            case .text(let text): frames.push(.text(text))
                            case .binary(let buffer): frames.push(.binary(Array(buffer: buffer)))
                            }
                        }
                        connection.cancelAll()
                    }
                }
            } catch {}
            frames.push(.closed)
            frames.finish()
        }
        defer {
            commandSink.finish()
            group.cancelAll()
        }
        return try await body(socket)
    }
}

extension TestWebSocket.Frame {
    /// The text of a text frame, or nil.
    public var textContent: String? {
        if case .text(let text) = self { return text }
        return nil
    }
}
