import Foundation
import Realtime
import Synchronization

/// A Socket.IO client for tests of a server built on this library, over a real WebSocket: it answers pings, joins
/// namespaces, emits with or without an acknowledgement and waits for the server's events. Packets that arrive
/// while it waits for another are kept for a later call. Drive it from one task; it does not reconnect and takes no
/// binary attachments.
public final class SocketIOTestClient: Sendable {
    /// The WebSocket under the client, for a test that sends or reads raw frames as well.
    public let webSocket: TestWebSocket

    private struct State {
        var pending: [SocketIOPacket] = []
        var nextAckId = 0
    }

    private let state = Mutex(State())

    init(webSocket: TestWebSocket) {
        self.webSocket = webSocket
    }

    /// Opens a session at `url` (`ws://host:port/socket.io/?EIO=4&transport=websocket`) for the duration of `body`.
    public static func withClient<Result: Sendable>(
        _ url: String, _ body: @Sendable (SocketIOTestClient) async throws -> Result
    ) async throws -> Result {
        try await withTestWebSocket(url, answerPings: true) { webSocket in
            let open = try await webSocket.next()
            guard case .text(let text) = open, text.hasPrefix("0") else {
                throw SocketIOTestClientError("expected the OPEN packet, got \(open)")
            }
            return try await body(SocketIOTestClient(webSocket: webSocket))
        }
    }

    /// Joins `namespace` with `auth` as CONNECT's payload and returns the socket's id.
    /// - Throws: ``SocketIOConnectRefused`` when the server answers CONNECT_ERROR.
    public func connect(
        _ namespace: String = "/", auth: JSONValue? = nil, timeout: Duration = .seconds(5)
    ) async throws -> String {
        send(SocketIOPacket(type: .connect, namespace: namespace, data: auth))
        let answer = try await next(timeout: timeout, "the answer to CONNECT \(namespace)") {
            $0.namespace == namespace && ($0.type == .connect || $0.type == .connectError)
        }
        if answer.type == .connectError {
            throw SocketIOConnectRefused(
                message: answer.data?["message"]?.stringValue ?? "",
                code: answer.data?["data"]?["code"]?.stringValue)
        }
        guard let id = answer.data?["sid"]?.stringValue else {
            throw SocketIOTestClientError("CONNECT answered without a sid: \(answer.encoded)")
        }
        return id
    }

    /// Emits `event` with `arguments` in `namespace`, asking for no acknowledgement.
    public func emit(_ event: String, _ arguments: [JSONValue] = [], in namespace: String = "/") {
        send(SocketIOPacket(type: .event, namespace: namespace, data: .array([.string(event)] + arguments)))
    }

    /// Emits `event` with `arguments` in `namespace` and returns the server's acknowledgement.
    public func emitWithAck(
        _ event: String, _ arguments: [JSONValue] = [], in namespace: String = "/", timeout: Duration = .seconds(5)
    ) async throws -> [JSONValue] {
        let id = state.withLock { state in
            defer { state.nextAckId += 1 }
            return state.nextAckId
        }
        send(SocketIOPacket(type: .event, namespace: namespace, ackId: id, data: .array([.string(event)] + arguments)))
        let answer = try await next(timeout: timeout, "the acknowledgement of \(event)") {
            $0.type == .ack && $0.namespace == namespace && $0.ackId == id
        }
        guard case .array(let values) = answer.data else {
            throw SocketIOTestClientError("an acknowledgement without arguments: \(answer.encoded)")
        }
        return values
    }

    /// The arguments of the next `event` the server emits in `namespace` (with recovery on, the last one is the
    /// recovery offset).
    public func next(_ event: String, in namespace: String = "/", timeout: Duration = .seconds(5)) async throws
        -> [JSONValue]
    {
        let packet = try await next(timeout: timeout, "the event \(event)") {
            guard $0.type == .event, $0.namespace == namespace, case .array(let values) = $0.data else { return false }
            return values.first == .string(event)
        }
        guard case .array(let values) = packet.data else { return [] }
        return Array(values.dropFirst())
    }

    /// Waits until the server disconnects the socket from `namespace` (DISCONNECT).
    public func nextDisconnect(in namespace: String = "/", timeout: Duration = .seconds(5)) async throws {
        _ = try await next(timeout: timeout, "DISCONNECT from \(namespace)") {
            $0.type == .disconnect && $0.namespace == namespace
        }
    }

    private func send(_ packet: SocketIOPacket) {
        webSocket.send("4" + packet.encoded)
    }

    /// The first packet, kept or new, that `matches`; the others it reads are kept.
    private func next(
        timeout: Duration, _ what: String, where matches: (SocketIOPacket) -> Bool
    ) async throws -> SocketIOPacket {
        let kept = state.withLock { state -> SocketIOPacket? in
            guard let index = state.pending.firstIndex(where: matches) else { return nil }
            return state.pending.remove(at: index)
        }
        if let kept { return kept }
        let deadline = ContinuousClock.now + timeout
        while true {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { throw TimedOut(what: what, timeout: timeout) }
            switch try await webSocket.next(timeout: remaining) {
            case .closed:
                throw SocketIOTestClientError("the connection closed while waiting for \(what)")
            case .binary:
                throw SocketIOTestClientError("a binary frame: attachments are not supported")
            case .text(let text):
                // Engine.IO packets other than MESSAGE (`4`): noop, pong, close.
                guard text.hasPrefix("4") else { continue }
                let packet = try SocketIOPacket.decode(String(text.dropFirst()), sentByServer: true)
                if matches(packet) { return packet }
                state.withLock { $0.pending.append(packet) }
            }
        }
    }
}
