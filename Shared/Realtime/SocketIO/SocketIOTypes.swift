import Foundation

/// The arguments of an event or acknowledgement: JSON values, with binary attachments that the values refer
/// to by `{"_placeholder":true,"num":N}`.
package struct SocketIOArguments: Sendable, Equatable {
    package var values: [JSONValue]
    package var attachments: [[UInt8]]

    package init(_ values: [JSONValue] = [], attachments: [[UInt8]] = []) {
        self.values = values
        self.attachments = attachments
    }
}

/// What a client sent when it connected to a namespace.
package struct SocketIOHandshake: Sendable {
    /// The CONNECT packet's `auth` payload (an object), if any.
    package var auth: JSONValue?
    /// The query of the Engine.IO request that opened the connection, without the protocol's own parameters.
    package var query: [String: String]
    /// The headers of that request that the engine keeps (``EngineConfiguration/retainedHeaders``), names
    /// lower-cased.
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

/// The acknowledgement a client asked for with its event; call ``send(_:)`` once.
package struct SocketIOAck: Sendable {
    let socket: SocketIOSocket
    let id: Int

    /// Answers the client's acknowledgement callback with `arguments`.
    package func send(_ arguments: SocketIOArguments) {
        socket.sendAck(id: id, arguments: arguments)
    }

    /// Answers with one value encoded with ``SocketIOConfiguration/coding``.
    package func send(_ value: some Encodable) {
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
