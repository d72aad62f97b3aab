import Contracts
import Foundation
import NIOCore
import NIOPosix

/// The arguments of an event or acknowledgement: JSON values, with binary attachments that the values refer
/// to by `{"_placeholder":true,"num":N}`.
package struct SocketIOArguments: Sendable, Equatable {
    package var values: [JSONValue]
    package var attachments: [[UInt8]]

    package init(_ values: [JSONValue] = [], attachments: [[UInt8]] = []) {
        self.values = values
        self.attachments = attachments
    }

    /// One argument encoded from `value` with the contracts' JSON coding.
    package init(encoding value: some Encodable) throws {
        self.init([try JSONValue(encoding: value)])
    }
}

/// What a client sent when it connected to a namespace.
package struct SocketIOHandshake: Sendable {
    /// The CONNECT packet's `auth` payload (an object), if any.
    package var auth: JSONValue?
    /// The query of the Engine.IO request that opened the connection.
    package var query: [String: String]
    /// Its headers, names lower-cased.
    package var headers: [String: String]

    /// A bearer token from `auth.token` (with or without `Bearer `) or the `Authorization` header.
    package var bearerToken: String? {
        let candidates = [auth?["token"]?.stringValue, headers["authorization"]]
        for candidate in candidates.compactMap({ $0?.trimmingCharacters(in: .whitespaces) }) where !candidate.isEmpty {
            if candidate.lowercased().hasPrefix("bearer ") {
                return String(candidate.dropFirst(7)).trimmingCharacters(in: .whitespaces)
            }
            return candidate
        }
        return nil
    }
}

/// A refused namespace connection: sent as CONNECT_ERROR `{"message":...,"data":{"code":...}}`.
package struct SocketIOConnectRefusal: Error, Sendable {
    package var message: String
    package var code: ErrorCode?
    package init(_ message: String, code: ErrorCode? = nil) {
        self.message = message
        self.code = code
    }
}

/// The acknowledgement a client asked for with its event; call ``send(_:)`` once.
package struct SocketIOAck: Sendable {
    let socket: SocketIOSocket
    let id: Int

    /// Answers the client's acknowledgement callback with `arguments`.
    package func send(_ arguments: SocketIOArguments) {
        socket.sendAck(id: id, arguments: arguments)
    }

    /// Answers with one value encoded with the contracts' JSON coding.
    package func send(_ value: some Encodable) {
        do {
            send(try SocketIOArguments(encoding: value))
        } catch {
            send(SocketIOArguments([SocketIOError.body(code: .internalError, message: "could not encode the answer")]))
        }
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

/// Socket.IO settings of a server.
package struct SocketIOConfiguration: Sendable {
    /// The per-socket limit on incoming events of every namespace that sets none of its own.
    package var rateLimit = SocketIORateLimit(eventsPerSecond: 20, burst: 50)
    /// The most bytes of packets that may wait to be handled per connection (each packet counts its size plus
    /// 64); a connection that sends faster than its packets are handled is closed.
    package var inboundBacklogLimit = 1 << 20
    /// Where per-socket deadlines (a token's expiry) are scheduled; tests pass an event loop whose time they
    /// advance.
    package var timers: any EventLoop = MultiThreadedEventLoopGroup.singleton.any()
    /// Connection state recovery (Socket.IO v4.6): nil turns it off (no `pid`, no offsets on events).
    package var recovery: SocketIORecoverySettings?
    /// The clock recovery's window is measured with.
    package var now: @Sendable () -> Date = { Date() }

    package init() {}
}

/// Who connected to a namespace, as its authorization hook established; the platform's identity type conforms.
package protocol SocketIOUser: Sendable {
    /// Every socket of the user joins the room ``SocketIONamespace/userRoom(_:)`` of this id.
    var userId: String { get }
}

/// Who a namespace's authorization hook let in, and until when (a token's `exp`): the socket is disconnected
/// then unless its credentials are refreshed first.
package struct SocketIOCredentials: Sendable {
    package var user: any SocketIOUser
    package var expiresAt: Date?
    package init(user: any SocketIOUser, expiresAt: Date? = nil) {
        self.user = user
        self.expiresAt = expiresAt
    }
}

/// A per-socket limit on incoming events: a token bucket of `burst` events refilled at `eventsPerSecond`.
package struct SocketIORateLimit: Sendable {
    package var eventsPerSecond: Double
    package var burst: Int
    package init(eventsPerSecond: Double, burst: Int) {
        self.eventsPerSecond = eventsPerSecond
        self.burst = burst
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
