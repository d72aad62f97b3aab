import HummingbirdWSClient
import Logging

/// The load generators' Socket.IO client: the raw protocol over one WebSocket, so thousands of clients fit in one
/// process.
package enum SocketIOLoadClient {
    /// Opens `url`, connects to `namespace` with `token`, and runs `body` with the inbound messages and the
    /// writer once the server accepted; returns without calling `body` if it refused.
    package static func connect(
        url: String, namespace: String, token: String, logger: Logger,
        _ body:
            @escaping @Sendable (inout WebSocketInboundMessageStream.AsyncIterator, WebSocketOutboundWriter)
            async throws -> Void
    ) async throws {
        try await WebSocketClient.connect(
            url: url, configuration: .init(maxFrameSize: 1 << 20, autoPing: .disabled), logger: logger
        ) {
            inbound, outbound, _ in
            var messages = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
            guard case .text? = try await messages.next() else { return }
            try await outbound.write(.text(#"40\#(namespace),{"token":"\#(token)"}"#))
            guard case .text(let answer)? = try await messages.next(), answer.hasPrefix("40\(namespace),") else {
                return
            }
            try await body(&messages, outbound)
        }
    }
}
