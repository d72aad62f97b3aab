import Hummingbird
import Logging
import ServiceLifecycle

/// The reference test server of the public Socket.IO protocol test suites (socketio/socket.io,
/// `docs/engine.io-protocol/v4-test-suite` and `docs/socket.io-protocol/v5-test-suite`):
///
/// - `/engine.io/`: a bare Engine.IO server that echoes every message;
/// - `/socket.io/`: Socket.IO with namespaces `/` and `/custom`; on connect it emits `auth` with the handshake's
///   auth payload; on `/` it answers `message` with `message-back` (same arguments, attachments included) and
///   `message-with-ack` through the acknowledgement.
public enum ConformanceServer {
    /// The suites' settings: ping every 300 ms, 200 ms to answer, 1 MB payloads, 1 s to join a namespace.
    public static func configuration(path: String, pingInterval: Duration, pingTimeout: Duration)
        -> EngineConfiguration
    {
        var configuration = EngineConfiguration()
        configuration.path = path
        configuration.pingInterval = pingInterval
        configuration.pingTimeout = pingTimeout
        configuration.maxPayload = 1_000_000
        return configuration
    }

    /// The application (both servers on `host:port`) and the realtime services to run after it in the service
    /// group, so that at shutdown they disconnect their sockets before the HTTP server goes away.
    public static func makeApplication(
        host: String = "127.0.0.1", port: Int, backlog: Int = 4096, pingInterval: Duration = .milliseconds(300),
        pingTimeout: Duration = .milliseconds(200), connectTimeout: Duration = .milliseconds(1000),
        firstRequestTimeout: Duration = .seconds(30), idleTimeout: Duration = .seconds(90), logger: Logger
    ) -> (application: some ApplicationProtocol, realtimeServices: [any Service]) {
        let echo = EngineServer(
            configuration: configuration(path: "/engine.io", pingInterval: pingInterval, pingTimeout: pingTimeout),
            handler: EchoHandler(), logger: logger
        )
        var socketIOConfiguration = configuration(
            path: "/socket.io", pingInterval: pingInterval, pingTimeout: pingTimeout)
        socketIOConfiguration.connectTimeout = connectTimeout
        let realtime = RealtimeServer(configuration: socketIOConfiguration, logger: logger)
        for name in ["/", "/custom"] {
            realtime.namespace(name).onConnect { socket in
                socket.emit("auth", SocketIOArguments([socket.handshake.auth ?? .object(JSONObject())]))
            }
        }
        let main = realtime.namespace("/")
        main.on("message") { socket, arguments, _ in
            socket.emit("message-back", arguments)
        }
        main.on("message-with-ack") { _, arguments, ack in
            ack?.send(arguments)
        }

        let router = Router()
        echo.addRoutes(to: router)
        realtime.addRoutes(to: router)
        let application = Application(
            router: router,
            server: RealtimeServerBuilder.http1WithWebSockets(
                [echo, realtime.engine], firstRequestTimeout: firstRequestTimeout, idleTimeout: idleTimeout),
            configuration: .init(
                address: .hostname(host, port: port), serverName: "socketio-conformance-server", backlog: backlog),
            logger: logger
        )
        return (application, [echo, realtime])
    }

    /// Echoes every Engine.IO message back as it came (text as text, binary as binary).
    struct EchoHandler: EngineHandler {
        func opened(_ session: EngineSession) { session.claim() }

        func receive(_ message: EngineMessage, from session: EngineSession) throws(EngineProtocolError) {
            switch message {
            case .text(let text): session.send([EnginePacket(.message, text)])
            case .binary(let bytes): session.send([.binary(bytes)])
            }
        }

        func closed(_ session: EngineSession, reason: EngineCloseReason) async {}
    }
}
