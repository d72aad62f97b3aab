import Foundation
import Hummingbird
import Realtime
import RealtimeTesting
import TestSupport
import Testing

/// The server-side API services use: rate limits, acknowledgements the server waits for, per-user emits,
/// disconnect hooks, and the DISCONNECT every socket gets at shutdown.
@Suite("Socket.IO server API", .timeLimit(.minutes(1)))
struct SocketIOServerAPITests {
    struct Counter: Codable, Sendable { var n: Int }

    final class Recorder: Sendable {
        let events = AsyncQueue<String>()
    }

    static func application(port: Int, recorder: Recorder) -> (some ApplicationProtocol, RealtimeServer) {
        let logger = TestInfrastructure.logger("api-tests")
        let realtime = RealtimeServer(configuration: EngineConfiguration(), logger: logger)
        let limited = realtime.namespace("/limited")
        limited.rateLimit = SocketIORateLimit(eventsPerSecond: 0.5, burst: 2)
        limited.on("count", Counter.self) { _, counter in counter }
        limited.onConnect { socket in
            do {
                let answer = try await socket.emitWithAck(
                    // Long enough for a loaded machine to carry the answer; the second connection waits it out.
                    "question", SocketIOArguments([.string("ready?")]), timeout: .seconds(2))
                recorder.events.push("answer:\(answer.values.first?.serialized ?? "")")
            } catch {
                recorder.events.push("ack-error:\(type(of: error))")
            }
        }
        limited.onDisconnect { _, reason in recorder.events.push("disconnected:\(reason.rawValue)") }
        let router = Router()
        realtime.addRoutes(to: router)
        let app = Application(
            router: router, server: RealtimeServerBuilder.http1WithWebSockets([realtime.engine]),
            configuration: .init(address: .hostname("127.0.0.1", port: port)), logger: logger
        )
        return (app, realtime)
    }

    @Test("events over the rate limit are answered RATE_LIMITED; the server's question is answered or times out")
    func rateLimitAndServerAcks() async throws {
        let port = TestPorts.allocate()
        let recorder = Recorder()
        let (app, realtime) = Self.application(port: port, recorder: recorder)
        try await withRunningApplication(app, port: port, services: [realtime]) {
            try await withTestWebSocket("ws://127.0.0.1:\(port)/socket.io/?EIO=4&transport=websocket") { socket in
                _ = try await socket.next()
                socket.send("40/limited,")
                #expect(try await socket.next().textContent?.hasPrefix("40/limited,") == true)
                #expect(try await socket.next() == .text(#"42/limited,0["question","ready?"]"#))
                socket.send(#"43/limited,0["yes"]"#)
                #expect(try await recorder.events.next() == #"answer:"yes""#)
                for index in 1...3 {
                    socket.send(#"42/limited,\#(index)["count",{"n":\#(index)}]"#)
                }
                #expect(try await socket.next() == .text(#"43/limited,1[{"n":1}]"#))
                #expect(try await socket.next() == .text(#"43/limited,2[{"n":2}]"#))
                let third = try await socket.next().textContent ?? ""
                #expect(third.hasPrefix("43/limited,3[{\"error\":{\"code\":\"RATE_LIMITED\""))
            }
            #expect(try await recorder.events.next() == "disconnected:transport close")
            try await withTestWebSocket("ws://127.0.0.1:\(port)/socket.io/?EIO=4&transport=websocket") { socket in
                _ = try await socket.next()
                socket.send("40/limited,")
                _ = try await socket.next()
                _ = try await socket.next()
                // No answer to the question: the server's wait ends after its timeout.
                #expect(try await recorder.events.next(timeout: .seconds(6)) == "ack-error:SocketIOAckTimeout")
            }
        }
    }

    @Test("at shutdown the connection closes without a DISCONNECT, so official clients reconnect")
    func shutdownDisconnects() async throws {
        let port = TestPorts.allocate()
        let recorder = Recorder()
        let (app, realtime) = Self.application(port: port, recorder: recorder)
        let frames = AsyncQueue<TestWebSocket.Frame>()
        try await withRunningApplication(app, port: port, services: [realtime]) {
            Task {
                try await withTestWebSocket("ws://127.0.0.1:\(port)/socket.io/?EIO=4&transport=websocket") { socket in
                    _ = try await socket.next()
                    socket.send("40/limited,")
                    while true {
                        let frame = try await socket.next(timeout: .seconds(10))
                        frames.push(frame)
                        if frame == .closed { return }
                    }
                }
            }
            #expect(try await frames.next()?.textContent?.hasPrefix("40/limited,") == true)
            try await eventually("the socket is counted") { realtime.socketIO.connectedSocketCount == 1 }
        }
        var rest: [TestWebSocket.Frame] = []
        while let frame = try await frames.next(timeout: .seconds(5)), frame != .closed { rest.append(frame) }
        #expect(!rest.contains(.text("41/limited,")), "a DISCONNECT keeps socket.io-client from reconnecting: \(rest)")
        #expect(rest.allSatisfy { $0.textContent?.hasPrefix("41") != true }, "frames after connect: \(rest)")
    }
}
