// How a connection or an event is refused, and why a socket left: together they answer what the client is told.

/// A refused namespace connection: sent as CONNECT_ERROR `{"message":...,"data":{"code":...}}`.
package struct SocketIOConnectRefusal: Error, Sendable {
    package var message: String
    package var code: SocketIOErrorCode?
    package init(_ message: String, code: SocketIOErrorCode? = nil) {
        self.message = message
        self.code = code
    }
}

/// An error answer to an acknowledged event, `{"error":{"code":"...","message":"..."}}`: thrown by a handler, or
/// what ``SocketIOConfiguration/describeError`` makes of another error.
package struct SocketIOEventError: Error, Sendable {
    package var code: SocketIOErrorCode
    package var message: String
    package init(code: SocketIOErrorCode, message: String) {
        self.code = code
        self.message = message
    }

    /// The acknowledgement's argument.
    package var body: JSONValue {
        .object(
            JSONObject([
                ("error", .object(JSONObject([("code", .string(code.rawValue)), ("message", .string(message))])))
            ]))
    }
}

/// An event's payload that did not decode as its handler's type; `underlying` is what the coding threw.
package struct SocketIOPayloadError: Error, Sendable {
    package var event: String
    package var underlying: any Error
    package init(event: String, underlying: any Error) {
        self.event = event
        self.underlying = underlying
    }
}

/// Why a socket left its namespace.
package enum SocketIODisconnectReason: String, Sendable {
    /// The client sent DISCONNECT.
    case clientNamespaceDisconnect = "client namespace disconnect"
    /// The server disconnected it.
    case serverNamespaceDisconnect = "server namespace disconnect"
    case transportClose = "transport close"
    case transportError = "transport error"
    case pingTimeout = "ping timeout"
    case parseError = "parse error"
    case serverShuttingDown = "server shutting down"

    /// Whether the client may recover its session after it: its connection dropped, rather than it or the server
    /// leaving the namespace (as Socket.IO decides).
    var isRecoverable: Bool {
        switch self {
        case .transportClose, .transportError, .pingTimeout, .serverShuttingDown: true
        case .clientNamespaceDisconnect, .serverNamespaceDisconnect, .parseError: false
        }
    }

    init(_ reason: EngineCloseReason) {
        switch reason {
        case .clientClose, .transportClose, .connectTimeout, .serverClose: self = .transportClose
        case .transportError, .outboundBacklogFull, .inboundBacklogFull: self = .transportError
        case .pingTimeout: self = .pingTimeout
        case .protocolError: self = .parseError
        case .serverShutdown: self = .serverShuttingDown
        }
    }
}
