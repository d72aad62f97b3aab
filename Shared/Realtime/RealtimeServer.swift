import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import ServiceLifecycle

/// What a service mounts for real-time: a Socket.IO server on an Engine.IO server at `configuration.path`, with
/// the store its instances share (in memory: one process). Run it in the service group; mount it with
/// ``addRoutes(to:)`` and the server builder from ``RealtimeServerBuilder``.
package final class RealtimeServer: Service, Sendable {
    package let socketIO: SocketIOServer
    package let engine: EngineServer
    private let logger: Logger

    package init(
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
    package var isFollowing: Bool { socketIO.acceptsSessions }

    /// The namespace `name`, e.g. `/chat`.
    package func namespace(_ name: String) -> SocketIONamespace { socketIO.namespace(name) }

    /// Adds the long-polling routes to `router`.
    package func addRoutes<Context: RequestContext>(to router: Router<Context>) { engine.addRoutes(to: router) }

    package func run() async throws {
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
package enum RealtimeServerBuilder {
    package static func http1WithWebSockets(_ servers: [EngineServer]) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in EngineHTTPChannel(responder: responder, servers: servers) }
    }
}
