import Foundation

/// The arguments of an event or acknowledgement: JSON values, with binary attachments that the values refer
/// to by `{"_placeholder":true,"num":N}`.
public struct SocketIOArguments: Sendable, Equatable {
    /// The JSON arguments in order (for an event, without its name).
    public var values: [JSONValue]
    /// The binary attachments, in the order of the placeholders' `num`; empty for a packet without binary data.
    public var attachments: [[UInt8]]

    /// Arguments of `values` and, if any, the `attachments` their placeholders refer to.
    public init(_ values: [JSONValue] = [], attachments: [[UInt8]] = []) {
        self.values = values
        self.attachments = attachments
    }
}

/// What a client sent when it connected to a namespace.
public struct SocketIOHandshake: Sendable {
    /// The CONNECT packet's `auth` payload (an object), if any.
    public var auth: JSONValue?
    /// The query of the Engine.IO request that opened the connection, without the protocol's own parameters.
    public var query: [String: String]
    /// The headers of that request that the engine keeps (``EngineConfiguration/retainedHeaders``), names
    /// lower-cased.
    public var headers: [String: String]

    /// A bearer token from `auth.token` (with or without `Bearer `) or the `Authorization` header.
    public var bearerToken: String? {
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

/// The acknowledgement a client asked for with its event; call ``send(_:)`` once.
public struct SocketIOAck: Sendable {
    let socket: SocketIOSocket
    let id: Int

    /// Answers the client's acknowledgement callback with `arguments`.
    public func send(_ arguments: SocketIOArguments) {
        socket.sendAck(id: id, arguments: arguments)
    }

    /// Answers with one value encoded with ``SocketIOConfiguration/coding``.
    public func send(_ value: some Encodable) {
        do {
            send(try socket.namespace.arguments(encoding: value))
        } catch {
            send(
                SocketIOArguments([
                    SocketIOEventError(code: .internalError, message: "could not encode the answer").body
                ]))
        }
    }
}
