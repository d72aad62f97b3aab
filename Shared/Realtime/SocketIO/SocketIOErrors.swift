import Contracts

// How a connection or an event is refused, and why a socket left: the four answer together what the client is told.

/// A refused namespace connection: sent as CONNECT_ERROR `{"message":...,"data":{"code":...}}`.
package struct SocketIOConnectRefusal: Error, Sendable {
    package var message: String
    package var code: ErrorCode?
    package init(_ message: String, code: ErrorCode? = nil) {
        self.message = message
        self.code = code
    }
}

/// A refusal of an event by the protocol layer (a missing payload, other credentials), answered with its code.
package struct SocketIOEventError: CodedError, Sendable {
    package var code: ErrorCode
    package var message: String
    package init(code: ErrorCode, message: String) {
        self.code = code
        self.message = message
    }
}

/// The error answer of an acknowledged event: `{"error":{"code":"...","message":"..."}}`.
package enum SocketIOError {
    package static func body(code: ErrorCode, message: String) -> JSONValue {
        .object(
            JSONObject([
                ("error", .object(JSONObject([("code", .string(code.rawValue)), ("message", .string(message))])))
            ]))
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
