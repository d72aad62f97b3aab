import Foundation
import Logging
import Realtime
import RealtimeTesting
import Testing

/// The protocol library as an application other than this platform uses it: its own coding and error answers,
/// an authorization hook, typed handlers, per-user emits, driven through the testing module's client.
@Suite("The protocol library on its own", .timeLimit(.minutes(1)))
struct RealtimeLibraryTests {
    struct Greeting: Codable, Sendable {
        var name: String
        var at: Date
    }

    struct Reply: Codable, Sendable {
        var text: String
        var at: Date
    }

    struct Member: SocketIOUser { var userId: String }
    struct ChatClosed: Error {}
    struct Broken: Error {}

    /// `/chat`: a bearer token `member-<name>` lets one in; `greet` answers and emits `greeted` to the user;
    /// `close` throws the application's own error, `break` one nobody describes.
    static func server() -> RealtimeServer {
        var socketIO = SocketIOConfiguration()
        socketIO.describeError = { error in
            if error is ChatClosed { return SocketIOEventError(code: "CHAT_CLOSED", message: "the chat is closed") }
            return SocketIOConfiguration.describeProtocolError(error)
        }
        var logger = Logger(label: "realtime-library-tests")
        logger.logLevel = .critical
        let realtime = RealtimeServer(configuration: EngineConfiguration(), socketIO: socketIO, logger: logger)
        let chat = realtime.namespace("/chat")
        chat.authorize { handshake in
            guard let token = handshake.bearerToken, token.hasPrefix("member-") else {
                throw SocketIOConnectRefusal("connect with a member token", code: .unauthorized)
            }
            return SocketIOCredentials(user: Member(userId: token))
        }
        chat.on("greet", Greeting.self) { socket, greeting in
            let reply = Reply(text: "hello \(greeting.name)", at: greeting.at)
            try await chat.emit("greeted", reply, toUser: socket.user?.userId ?? "")
            return reply
        }
        chat.on("close", Greeting.self) { _, _ -> Reply in throw ChatClosed() }
        chat.on("break", Greeting.self) { _, _ -> Reply in throw Broken() }
        return realtime
    }

    static func url(_ port: Int) -> String { "ws://127.0.0.1:\(port)/socket.io/?EIO=4&transport=websocket" }

    @Test("the authorization hook refuses with its code and lets a member in")
    func authorization() async throws {
        try await withRealtimeServer(Self.server()) { port in
            try await SocketIOTestClient.withClient(Self.url(port)) { client in
                await #expect(
                    throws: SocketIOConnectRefused(message: "connect with a member token", code: "UNAUTHORIZED")
                ) {
                    try await client.connect("/chat", auth: .object(JSONObject([("token", .string("stranger"))])))
                }
                let id = try await client.connect(
                    "/chat", auth: .object(JSONObject([("token", .string("member-ana"))])))
                #expect(!id.isEmpty)
            }
        }
    }

    @Test("a typed handler answers in the standard coding and emits to the user; failures are answered by code")
    func handlers() async throws {
        try await withRealtimeServer(Self.server()) { port in
            try await SocketIOTestClient.withClient(Self.url(port)) { client in
                _ = try await client.connect("/chat", auth: .object(JSONObject([("token", .string("member-ana"))])))
                let greeting = try JSONValue.parse(#"{"name":"Ana","at":"2026-11-27T10:15:00Z"}"#)
                let reply = #"{"at":"2026-11-27T10:15:00.000Z","text":"hello Ana"}"#
                #expect(try await client.emitWithAck("greet", [greeting], in: "/chat").map(\.serialized) == [reply])
                #expect(try await client.next("greeted", in: "/chat").map(\.serialized) == [reply])

                let undecodable = try await client.emitWithAck(
                    "greet", [try JSONValue.parse(#"{"name":1}"#)], in: "/chat")
                #expect(undecodable.first?["error"]?["code"]?.stringValue == "VALIDATION_FAILED")
                let missing = try await client.emitWithAck("greet", [], in: "/chat")
                #expect(missing.first?["error"]?["message"]?.stringValue == "greet needs a payload object")
                let closed = try await client.emitWithAck("close", [greeting], in: "/chat")
                #expect(closed.first?.serialized == #"{"error":{"code":"CHAT_CLOSED","message":"the chat is closed"}}"#)
                let broken = try await client.emitWithAck("break", [greeting], in: "/chat")
                #expect(broken.first?.serialized == #"{"error":{"code":"INTERNAL_ERROR","message":"internal error"}}"#)
            }
        }
    }
}
