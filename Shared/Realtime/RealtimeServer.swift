import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import ServiceLifecycle

/// What a service mounts for real-time: a Socket.IO server on an Engine.IO server at `configuration.path`, with
/// the store its instances share (in memory: one process). Run it in the service group; mount it with
/// ``addRoutes(to:)`` and the server builder from ``RealtimeServerBuilder``.
public final class RealtimeServer: Service, Sendable {
    /// The Socket.IO server: where the namespaces are registered and the sockets are.
    public let socketIO: SocketIOServer
    /// The Engine.IO server under it; ``RealtimeServerBuilder/http1WithWebSockets(_:firstRequestTimeout:idleTimeout:)`` takes it
    /// for the WebSocket upgrades.
    public let engine: EngineServer
    private let logger: Logger

    /// A Socket.IO server with `socketIO`'s settings and `store` on an Engine.IO server with `configuration`; a nil
    /// ``EngineConfiguration/connectTimeout`` becomes 45 seconds.
    public init(
        configuration: EngineConfiguration,
        socketIO socketIOConfiguration: SocketIOConfiguration = SocketIOConfiguration(),
        store: any RealtimeStore = InMemoryRealtimeStore(), logger: Logger
    ) {
        var configuration = configuration
        if configuration.connectTimeout == nil { configuration.connectTimeout = .seconds(45) }
        let socketIO = SocketIOServer(configuration: socketIOConfiguration, store: store, logger: logger)
        self.socketIO = socketIO
        self.engine = EngineServer(configuration: configuration, handler: socketIO, logger: logger)
        self.logger = logger
    }

    /// Whether the store's notices are followed: until then Socket.IO handshakes are answered 503 and `/ready` says
    /// "down" for `realtime`.
    public var isFollowing: Bool { socketIO.acceptsSessions }

    /// The namespace `name`, e.g. `/chat`.
    public func namespace(_ name: String) -> SocketIONamespace { socketIO.namespace(name) }

    /// Adds the long-polling routes to `router`.
    public func addRoutes<Context: RequestContext>(to router: Router<Context>) { engine.addRoutes(to: router) }

    /// Follows the store and serves sessions until graceful shutdown, which closes the transports without a Socket.IO
    /// DISCONNECT so that the clients reconnect (to another instance during a rolling deploy).
    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask { [socketIO = self.socketIO] in await socketIO.runStore() }
                group.addTask { [socketIO = self.socketIO] in
                    defer { socketIO.finishStoreWork() }
                    try await self.engine.run()
                }
            }
        } onGracefulShutdown: {
            // The transports close without a Socket.IO DISCONNECT: the official clients read a DISCONNECT as
            // being sent away and never reconnect, while after a closed transport they reconnect (to another
            // instance during a rolling deploy).
            self.engine.shutDown()
        }
    }
}

/// Builds the HTTP server of an application that serves Engine.IO servers: HTTP/1.1 with WebSocket upgrades
/// routed to the server whose path matches, served on the event loop (``EngineHTTPChannel``).
public enum RealtimeServerBuilder {
    /// The HTTP server builder: a WebSocket upgrade goes to the server among `servers` whose
    /// ``EngineConfiguration/path`` it requests; every other request goes to the application's router. A connection
    /// that has not sent the head of its first request within `firstRequestTimeout` is closed, and so is an HTTP
    /// connection with no request in flight for `idleTimeout` (a long poll in flight keeps it open).
    public static func http1WithWebSockets(
        _ servers: [EngineServer], firstRequestTimeout: Duration = .seconds(30), idleTimeout: Duration = .seconds(90)
    ) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            EngineHTTPChannel(
                responder: responder, servers: servers, firstRequestTimeout: firstRequestTimeout,
                idleTimeout: idleTimeout)
        }
    }
}
