import Foundation
import Hummingbird
import Kafka
import Logging
import ServiceKit

/// Real-time settings read from the environment.
package struct RealtimeSettings: Sendable {
    /// `SOCKETIO_PATH`, default `/socket.io`.
    package var path: String
    /// `SOCKETIO_PING_INTERVAL_MS`, default 25000.
    package var pingInterval: Duration
    /// `SOCKETIO_PING_TIMEOUT_MS`, default 20000.
    package var pingTimeout: Duration
    /// `SOCKETIO_MAX_PAYLOAD`, default 1,000,000 bytes.
    package var maxPayload: Int

    package init(environment: ServiceEnvironment) throws(ConfigurationError) {
        path = environment.optional("SOCKETIO_PATH") ?? "/socket.io"
        guard path.hasPrefix("/") else {
            throw ConfigurationError(variable: "SOCKETIO_PATH", problem: "'\(path)' must start with /")
        }
        pingInterval = try environment.milliseconds("SOCKETIO_PING_INTERVAL_MS", default: .seconds(25), in: 100...600_000)
        pingTimeout = try environment.milliseconds("SOCKETIO_PING_TIMEOUT_MS", default: .seconds(20), in: 100...600_000)
        maxPayload = try environment.int("SOCKETIO_MAX_PAYLOAD", default: 1_000_000, in: 1_024...100_000_000)
    }
}

extension ServicePlatform {
    /// The service's Socket.IO server, with the Kafka adapter on `realtime.<service>` (a consumer group per
    /// instance) so emits reach sockets held by every instance.
    package func makeRealtimeServer(environment: ServiceEnvironment) async throws -> RealtimeServer {
        let settings = try RealtimeSettings(environment: environment)
        var engine = EngineConfiguration()
        engine.path = settings.path
        engine.pingInterval = settings.pingInterval
        engine.pingTimeout = settings.pingTimeout
        engine.maxPayload = settings.maxPayload
        let topic = "realtime.\(configuration.serviceName)"
        let client = configuration.kafka.clientConfiguration(clientId: configuration.serviceName)
        do {
            try await KafkaAdmin.createTopics(
                [KafkaTopicSpecification(name: topic, partitions: 1, replicationFactor: configuration.kafka.topicReplicationFactor)],
                client: client, timeout: .seconds(5), logger: logger
            )
        } catch {
            logger.warning("could not create \(topic); the broker may create it", metadata: ["error": "\(error)"])
        }
        let adapter = KafkaRealtimeAdapter(
            topic: topic, producer: producer,
            consumer: consumerConfiguration(name: "realtime.\(UUID().uuidString.lowercased())"), logger: logger
        )
        return RealtimeServer(configuration: engine, adapter: adapter, logger: logger)
    }

    /// The application with `realtime` mounted: its polling routes on `router`, WebSocket upgrades, and the
    /// realtime server stopping (disconnecting every socket) before the HTTP server.
    package func makeApplication(router: Router<ServiceRequestContext>, realtime: RealtimeServer) -> ServiceApplication {
        realtime.addRoutes(to: router)
        return makeApplication(
            router: router, server: RealtimeServerBuilder.http1WithWebSockets([realtime.engine]),
            servicesShutDownFirst: [realtime]
        )
    }
}
