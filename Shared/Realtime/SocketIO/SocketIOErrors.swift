// How a connection or an event is refused, and why a socket left: together they answer what the client is told.

/// A refused namespace connection: sent as CONNECT_ERROR `{"message":...,"data":{"code":...}}`.
public struct SocketIOConnectRefusal: Error, Sendable {
    /// The CONNECT_ERROR's `message`, shown to the client's `connect_error` listener.
    public var message: String
    /// The CONNECT_ERROR's `data.code`; nil sends no `data`.
    public var code: SocketIOErrorCode?
    /// A refusal with `message` and, optionally, a machine-readable `code`.
    public init(_ message: String, code: SocketIOErrorCode? = nil) {
        self.message = message
        self.code = code
    }
}

/// An error answer to an acknowledged event, `{"error":{"code":"...","message":"..."}}`: thrown by a handler, or
/// what ``SocketIOConfiguration/describeError`` makes of another error.
public struct SocketIOEventError: Error, Sendable {
    /// The answer's `error.code`, which clients switch on.
    public var code: SocketIOErrorCode
    /// The answer's `error.message`, for people (clients do not switch on it).
    public var message: String
    /// An error answer; thrown from a handler, it is sent to the client as ``body``.
    public init(code: SocketIOErrorCode, message: String) {
        self.code = code
        self.message = message
    }

    /// The acknowledgement's argument.
    public var body: JSONValue {
        .object(
            JSONObject([
                ("error", .object(JSONObject([("code", .string(code.rawValue)), ("message", .string(message))])))
            ]))
    }
}

/// An event's payload that did not decode as its handler's type; `underlying` is what the coding threw.
public struct SocketIOPayloadError: Error, Sendable {
    /// The event whose payload did not decode.
    public var event: String
    /// What the coding threw, such as a `DecodingError`; ``SocketIOConfiguration/describeProtocolError(_:)`` puts it
    /// in the `VALIDATION_FAILED` message.
    public var underlying: any Error
    /// An error for `event`'s payload, wrapping what the coding threw.
    public init(event: String, underlying: any Error) {
        self.event = event
        self.underlying = underlying
    }
}

/// Why a socket left its namespace.
public enum SocketIODisconnectReason: String, Sendable {
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
