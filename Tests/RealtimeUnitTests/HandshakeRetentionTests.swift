import HTTPTypes
import Logging
import Testing

@testable import Realtime

/// What a session keeps of the request that opened it: the configured headers and the application's query
/// parameters, nothing of the protocol's own, since whatever it keeps lives as long as the connection.
@Suite("Engine.IO handshake retention")
struct HandshakeRetentionTests {
    static let request: HTTPFields = [
        .authorization: "Bearer abc", .userAgent: "okhttp/4.12", .acceptLanguage: "en", .cookie: "a=b",
    ]
    static let query = ["EIO": "4", "transport": "websocket", "t": "PZx1", "orderId": "o-1"]

    static func session(_ configuration: EngineConfiguration) throws -> EngineSession {
        let server = EngineServer(
            configuration: configuration, handler: IdleEngineHandler(), logger: Logger(label: "test"))
        return try server.openSession(query: query, headers: request, peer: nil, transport: .polling).get()
    }

    @Test("by default a session keeps the Authorization header and the application's query parameters")
    func defaults() throws {
        let session = try Self.session(EngineConfiguration())
        #expect(session.headers == ["authorization": "Bearer abc"])
        #expect(session.query == ["orderId": "o-1"])
        let handshake = SocketIOHandshake(auth: nil, query: session.query, headers: session.headers)
        #expect(handshake.bearerToken == "abc")
    }

    @Test("the retained headers are configurable, and nil keeps every header")
    func configured() throws {
        var configuration = EngineConfiguration()
        configuration.retainedHeaders = ["user-agent", "authorization"]
        #expect(
            try Self.session(configuration).headers == ["authorization": "Bearer abc", "user-agent": "okhttp/4.12"])
        configuration.retainedHeaders = nil
        #expect(try Self.session(configuration).headers.count == 4)
    }
}
