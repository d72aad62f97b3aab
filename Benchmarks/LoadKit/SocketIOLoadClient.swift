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
        try await connect(url: url, namespace: namespace, auth: #"{"token":"\#(token)"}"#, logger: logger) {
            _, _, messages, outbound in
            try await body(&messages, outbound)
        }
    }

    /// Opens `url` and connects to `namespace` with the `auth` object (JSON); runs `body` with the CONNECT answer,
    /// the packets that came before it (a recovered session's missed emits), the inbound messages and the writer.
    /// Returns without calling `body` if the server refused.
    package static func connect(
        url: String, namespace: String, auth: String, logger: Logger,
        _ body:
            @escaping @Sendable (
                _ answer: String, _ early: [String], inout WebSocketInboundMessageStream.AsyncIterator,
                WebSocketOutboundWriter
            ) async throws -> Void
    ) async throws {
        try await WebSocketClient.connect(
            url: url, configuration: .init(maxFrameSize: 1 << 20, autoPing: .disabled), logger: logger
        ) {
            inbound, outbound, _ in
            var messages = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
            guard case .text? = try await messages.next() else { return }
            try await outbound.write(.text("40\(namespace),\(auth)"))
            var early: [String] = []
            while case .text(let text)? = try await messages.next() {
                if text.hasPrefix("40\(namespace),") {
                    try await body(text, early, &messages, outbound)
                    return
                }
                if text.hasPrefix("44\(namespace),") { return }
                if text == "2" {
                    try await outbound.write(.text("3"))
                } else {
                    early.append(text)
                }
            }
        }
    }
}
