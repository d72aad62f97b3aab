import ArgumentParser
import Hummingbird
import Logging
import Realtime
import ServiceLifecycle

/// `swift run socketio-conformance-server --port 3000`: the server the public Socket.IO and Engine.IO protocol
/// test suites run against, and the target of the realtime load benchmark.
@main
struct SocketIOConformanceServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "socketio-conformance-server",
        abstract: "Socket.IO v5 / Engine.IO v4 reference test server (/socket.io/ and the /engine.io/ echo)."
    )

    @Option(help: "Listen address.")
    var host = "127.0.0.1"

    @Option(help: "Listen port.")
    var port = 3000

    @Option(help: "Connections the kernel queues before they are accepted (capped by net.core.somaxconn).")
    var backlog = 4096

    @Option(
        name: .customLong("ping-interval"), help: "Milliseconds between pings (the suites use 300; production 25000).")
    var pingInterval = 300

    @Option(name: .customLong("ping-timeout"), help: "Milliseconds a client has to answer a ping.")
    var pingTimeout = 200

    @Option(
        name: .customLong("connect-timeout"),
        help: "Milliseconds a connection may take to join a namespace (the suites use 1000).")
    var connectTimeout = 1000

    @Option(help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    func run() async throws {
        var logger = Logger(label: "socketio-conformance-server")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        let (application, realtime) = ConformanceServer.makeApplication(
            host: host, port: port, backlog: backlog, pingInterval: .milliseconds(pingInterval),
            pingTimeout: .milliseconds(pingTimeout),
            connectTimeout: .milliseconds(connectTimeout), logger: logger
        )
        // Shut down in reverse order: the realtime servers disconnect their sockets, then the HTTP server stops.
        let group = ServiceGroup(
            configuration: .init(
                services: [application] + realtime, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        )
        try await group.run()
    }
}
