import Contracts
import Foundation
import Hummingbird
import Kafka
import Logging
import Realtime
import RealtimePlatform
import RealtimeTesting
import ServiceKit
import TestSupport
import Testing

/// The server against python-socketio, a real and independently written client, in its default mode (polling
/// then upgrade) and WebSocket-only, with JWT authorization, acknowledgements, server events, rooms, and two
/// server instances sharing a Postgres realtime store.
@Suite("Socket.IO against the python-socketio client", .timeLimit(.minutes(3)))
struct PythonClientTests {
    struct Empty: Codable, Sendable {}
    struct Who: Codable, Sendable {
        var userId: String
        var role: Role
    }
    struct JoinRequest: Codable, Sendable { var room: String }
    struct SayRequest: Codable, Sendable {
        var room: String
        var text: String
    }
    struct Said: Codable, Sendable {
        var room: String
        var text: String
        var from: String
    }
    struct OK: Codable, Sendable { var ok = true }

    /// A server with the `/secure` namespace: tokens required, `whoami`, `join` and `say` (to a room).
    static func makeApplication(port: Int, store: any RealtimeStore = InMemoryRealtimeStore()) async throws -> (
        some ApplicationProtocol, RealtimeServer
    ) {
        let logger = TestInfrastructure.logger("python-client-tests")
        var configuration = EngineConfiguration()
        configuration.pingInterval = .milliseconds(300)
        // python-socketio times a WebSocket read out after pingInterval + pingTimeout; leave room for a loaded CI machine.
        configuration.pingTimeout = .seconds(5)
        let realtime = RealtimeServer(configuration: configuration, store: store, logger: logger)
        let secure = realtime.namespace("/secure")
        secure.requireToken(try await JWTKeyCollectionForTests.verifier())
        secure.onConnect { socket in
            socket.emit("welcome", Who(userId: socket.identity!.userId, role: socket.identity!.role))
        }
        secure.on("whoami", Empty.self) { socket, _ in Who(userId: socket.identity!.userId, role: socket.identity!.role)
        }
        secure.on("join", JoinRequest.self) { socket, request in
            socket.join(request.room)
            return OK()
        }
        secure.on("say", SayRequest.self) { socket, request in
            try await secure.emit(
                "said", Said(room: request.room, text: request.text, from: socket.identity!.userId),
                toRoom: request.room)
            return OK()
        }
        let router = Router()
        realtime.addRoutes(to: router)
        let application = Application(
            router: router, server: RealtimeServerBuilder.http1WithWebSockets([realtime.engine]),
            configuration: .init(address: .hostname("127.0.0.1", port: port)), logger: logger
        )
        return (application, realtime)
    }

    /// Runs a scenario of client_scenarios.py and returns its JSON output.
    static func scenario(_ arguments: [String]) async throws -> JSONValue {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "python/client_scenarios.py")
        let process = try ChildProcess(
            executable: try TestInfrastructure.python(), arguments: [script.path] + arguments)
        let status = await process.exitStatus()
        let output = process.output
        guard status == 0, let line = output.split(separator: "\n").last(where: { $0.hasPrefix("{") }) else {
            throw ProtocolMismatch("scenario \(arguments.first ?? "") failed (status \(status)): \(output)")
        }
        return try JSONValue.parse(String(line))
    }

    @Test(
        "connects with a valid token in default (polling, then upgrade) and WebSocket-only mode, acks, stays up across pings",
        arguments: ["polling,websocket", "websocket"]
    )
    func connects(transports: String) async throws {
        let port = TestPorts.allocate()
        let token = try await TestAuth.token("rider-1", .rider, name: "Ravi")
        let result = try await withRunningServer(try await Self.makeApplication(port: port), port: port) {
            try await Self.scenario(["basic", "http://127.0.0.1:\(port)", token, transports, "1.5"])
        }
        try #require(result["connected"] == .bool(true), "python-socketio could not connect: \(result)")
        #expect(result["whoami"] == .object(JSONObject([("role", .string("rider")), ("userId", .string("rider-1"))])))
        #expect(result["bad_payload"]?["error"]?["code"] == .string("VALIDATION_FAILED"), "\(result)")
        #expect(result["bad_payload"]?["error"]?["message"]?.stringValue?.contains("'room'") == true)
        #expect(result["transport"] == .string("websocket"))
        #expect(result["still_connected"] == .bool(true))
        #expect(result["after_wait"] == result["whoami"])
        #expect(result["events"] == .array([.array([.string("welcome"), result["whoami"] ?? .null])]))
    }

    @Test("a missing, expired or forged token is refused with CONNECT_ERROR", arguments: ["none", "expired", "forged"])
    func refusesBadTokens(kind: String) async throws {
        let port = TestPorts.allocate()
        let token: String =
            switch kind {
            // Expired beyond the 60 s of clock skew allowed.
            case "expired": try await TestAuth.issuer.token(userId: "u", role: .customer, expiresIn: .seconds(-120))
            case "forged":
                try await TokenIssuer(privateKey: .init(), issuer: TestAuth.issuerName, audience: TestAuth.audience)
                    .token(userId: "u", role: .customer)
            default: ""
            }
        let result = try await withRunningServer(try await Self.makeApplication(port: port), port: port) {
            try await Self.scenario(["basic", "http://127.0.0.1:\(port)", token, "polling,websocket", "0"])
        }
        #expect(result["connected"] == .bool(false))
        #expect(result["error"]?.stringValue?.isEmpty == false)
    }

    @Test("an emit to a room reaches only that room's sockets")
    func rooms() async throws {
        let port = TestPorts.allocate()
        let tokens = [
            try await TestAuth.token("a", .customer), try await TestAuth.token("b", .customer),
            try await TestAuth.token("c", .rider),
        ]
        let result = try await withRunningServer(try await Self.makeApplication(port: port), port: port) {
            try await Self.scenario(["rooms", "http://127.0.0.1:\(port)", "http://127.0.0.1:\(port)"] + tokens)
        }
        #expect(result["sent"] == .number("1"))
        #expect(
            result["a"]
                == .array([
                    .object(
                        JSONObject([
                            ("from", .string("c")), ("room", .string("room-a")), ("text", .string("hello room a")),
                        ]))
                ]))
        #expect(result["b"] == .array([]))
    }

    @Test("two instances sharing a Postgres realtime store: an emit on one reaches a client on the other")
    func crossInstance() async throws {
        let tokens = [
            try await TestAuth.token("a", .customer), try await TestAuth.token("b", .customer),
            try await TestAuth.token("c", .rider),
        ]
        let result = try await withTestDatabase { database in
            let logger = TestInfrastructure.logger("realtime-store")
            @Sendable func store() -> PostgresRealtimeStore {
                PostgresRealtimeStore(database: database, retention: .seconds(240), now: .system, logger: logger)
            }
            let (first, second) = (TestPorts.allocate(), TestPorts.allocate())
            let (firstInstance, secondInstance) = (
                try await Self.makeApplication(port: first, store: store()),
                try await Self.makeApplication(port: second, store: store())
            )
            return try await withRunningServer(firstInstance, port: first) {
                try await withRunningServer(secondInstance, port: second) {
                    // Handshakes are refused (503) until an instance follows the store's notices.
                    try await eventually(timeout: .seconds(30), "both instances following the realtime store") {
                        firstInstance.1.isFollowing && secondInstance.1.isFollowing
                    }
                    return try await Self.scenario(
                        ["rooms", "http://127.0.0.1:\(first)", "http://127.0.0.1:\(second)"] + tokens)
                }
            }
        }
        guard case .array(let heard) = result["a"] else { throw ProtocolMismatch("no result for a") }
        #expect(!heard.isEmpty, "the client on the first instance heard nothing from the second")
        #expect(heard.allSatisfy { $0["from"] == .string("c") && $0["room"] == .string("room-a") })
        #expect(result["b"] == .array([]))
    }
}

/// Runs an application with its realtime server (shut down first).
func withRunningServer<App: ApplicationProtocol, Result: Sendable>(
    _ server: (App, RealtimeServer), port: Int, _ body: @Sendable () async throws -> Result
) async throws -> Result {
    try await withRunningApplication(server.0, port: port, services: [server.1], body)
}

/// A verifier trusting the test token issuer.
enum JWTKeyCollectionForTests {
    /// The test issuer's verifier; `leeway` is the clock skew it allows (the services' default unless a test needs
    /// exact expiry times).
    static func verifier(leeway: Duration = .seconds(60)) async throws -> AccessTokenVerifier {
        let settings = ServiceConfiguration.AuthSettings(
            issuer: TestAuth.issuerName, audience: TestAuth.audience, keySource: .publicKeyFile(TestAuth.publicKeyFile),
            leeway: leeway
        )
        return try await AccessTokenVerifier.load(settings, logger: TestInfrastructure.logger("auth"))
    }
}
