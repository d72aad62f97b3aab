import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Realtime
import TestSupport

/// The conformance server on a port of its own, and clients for it that speak the raw protocol.
struct ConformanceFixture: Sendable {
    let port: Int
    /// `/engine.io` or `/socket.io`.
    let path: String

    var httpBase: String { "http://127.0.0.1:\(port)\(path)/" }
    var webSocketBase: String { "ws://127.0.0.1:\(port)\(path)/" }

    /// `?EIO=4&transport=polling` plus `extra`.
    func pollingURL(_ extra: String = "") -> String { httpBase + "?EIO=4&transport=polling" + extra }
    func webSocketURL(_ extra: String = "") -> String { webSocketBase + "?EIO=4&transport=websocket" + extra }

    /// Runs `body` against a fresh conformance server. `pingTimeout` is the suite's 200 ms unless a check of answered
    /// pings needs room for a loaded machine (where a missed pong is not what it tests).
    static func run<Result: Sendable>(
        path: String, pingTimeout: Duration = .milliseconds(200),
        _ body: @Sendable (ConformanceFixture) async throws -> Result
    ) async throws -> Result {
        let port = TestPorts.allocate()
        let (app, realtime) = ConformanceServer.makeApplication(
            port: port, pingTimeout: pingTimeout, logger: TestInfrastructure.logger("conformance"))
        return try await withRunningApplication(app, port: port, services: realtime) {
            try await body(ConformanceFixture(port: port, path: path))
        }
    }

    struct HTTPAnswer: Sendable {
        var status: Int
        var body: String
        var contentType: String?

        /// The Engine.IO packets of a polling GET's answer, which must be a 200.
        func pollingPackets() throws -> [String] {
            guard status == 200 else { throw ProtocolMismatch("poll answered \(status): \(body)") }
            return body.split(separator: "\u{1E}").map(String.init)
        }
    }

    func request(_ method: HTTPMethod, _ url: String, body: String? = nil) async throws -> HTTPAnswer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let body {
            request.body = .bytes(ByteBuffer(string: body))
            request.headers.add(name: "Content-Type", value: "text/plain;charset=UTF-8")
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 4 << 20)
        return HTTPAnswer(
            status: Int(response.status.code), body: String(buffer: bytes),
            contentType: response.headers.first(name: "Content-Type"))
    }

    func get(_ url: String) async throws -> HTTPAnswer { try await request(.GET, url) }
    func post(_ url: String, _ body: String) async throws -> HTTPAnswer { try await request(.POST, url, body: body) }

    /// Opens a polling session and returns its sid.
    func openPollingSession() async throws -> String {
        let answer = try await get(pollingURL())
        let open = try JSONValue.parse(String(answer.body.dropFirst()))
        guard let sid = open["sid"]?.stringValue else { throw ProtocolMismatch("no sid in \(answer.body)") }
        return sid
    }

    /// Polls session `sid` until at least `count` packets have come, and returns them. The server writes a CONNECT
    /// answer before what its connection handler emits: one poll may take both, or on a loaded machine the first
    /// alone.
    func pollPackets(sid: String, count: Int) async throws -> [String] {
        var packets: [String] = []
        while packets.count < count {
            packets += try await get(pollingURL("&sid=\(sid)")).pollingPackets()
        }
        return packets
    }
}

struct ProtocolMismatch: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
