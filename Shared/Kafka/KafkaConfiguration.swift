/// Where the brokers are and how this client names itself; shared by producers, consumers and the admin.
package struct KafkaClientConfiguration: Sendable {
    /// `host:port` of one or more brokers.
    package var bootstrapServers: [String]
    package var clientId: String
    /// librdkafka properties applied last, overriding everything this wrapper sets (escape hatch), e.g.
    /// `["max.poll.interval.ms": "300000"]` for Apache Kafka.
    package var additionalProperties: [String: String]

    package init(bootstrapServers: [String], clientId: String, additionalProperties: [String: String] = [:]) {
        self.bootstrapServers = bootstrapServers
        self.clientId = clientId
        self.additionalProperties = additionalProperties
    }

    var baseProperties: [String: String] {
        [
            "bootstrap.servers": bootstrapServers.joined(separator: ","),
            "client.id": clientId,
            // Keys map to partitions the way Java clients map them.
            "partitioner": "murmur2_random",
            // Fail fast on an unreachable broker instead of hanging for minutes.
            "socket.connection.setup.timeout.ms": "5000",
            "reconnect.backoff.max.ms": "2000",
        ]
    }
}

/// An idempotent producer (acks=all) tuned for low latency.
package struct KafkaProducerConfiguration: Sendable {
    package var client: KafkaClientConfiguration
    /// How long a batch waits for more messages; 0-1 ms keeps real-time paths fast.
    package var linger: Duration = .milliseconds(1)
    /// How long librdkafka keeps trying to deliver a message before the send fails.
    package var deliveryTimeout: Duration = .seconds(30)

    package init(client: KafkaClientConfiguration) { self.client = client }

    var properties: [String: String] {
        var properties = client.baseProperties
        properties["enable.idempotence"] = "true"
        properties["acks"] = "all"
        properties["linger.ms"] = String(linger.milliseconds)
        properties["message.timeout.ms"] = String(max(deliveryTimeout.milliseconds, 1))
        properties.merge(client.additionalProperties) { _, new in new }
        return properties
    }
}

/// A consumer-group member that commits explicitly after processing.
package struct KafkaConsumerConfiguration: Sendable {
    /// Where a group without a committed offset starts reading.
    package enum OffsetReset: String, Sendable {
        case earliest
        case latest
    }

    package var client: KafkaClientConfiguration
    package var groupId: String
    package var autoOffsetReset: OffsetReset = .earliest
    /// How long the broker may hold a fetch open. Tansu does not wake a waiting fetch when data arrives, so
    /// real-time consumers need 5-10 ms (librdkafka's default of 500 ms costs about 250 ms per hop there).
    package var fetchMaxWait: Duration = .milliseconds(10)
    /// A member that does not poll for this long leaves the group. Tansu needs a short value (about 7 s) or a
    /// rebalance can hang for minutes; raise it for Apache Kafka with slow handlers.
    package var maxPollInterval: Duration = .seconds(7)
    package var sessionTimeout: Duration = .seconds(6)
    package var heartbeatInterval: Duration = .seconds(1)
    /// How long ``KafkaConsumer/close()`` waits for the broker to confirm the member left the group. Tansu holds
    /// that answer while a join is pending (up to about 5 s); past this bound the close goes on in the background
    /// and the broker drops the member after `sessionTimeout` (a commit still in flight may be redelivered).
    package var closeTimeout: Duration = .seconds(2)

    package init(client: KafkaClientConfiguration, groupId: String) {
        self.client = client
        self.groupId = groupId
    }

    var properties: [String: String] {
        var properties = client.baseProperties
        properties["group.id"] = groupId
        properties["enable.auto.commit"] = "false"
        properties["enable.auto.offset.store"] = "false"
        properties["auto.offset.reset"] = autoOffsetReset.rawValue
        properties["fetch.wait.max.ms"] = String(fetchMaxWait.milliseconds)
        properties["max.poll.interval.ms"] = String(maxPollInterval.milliseconds)
        properties["session.timeout.ms"] = String(sessionTimeout.milliseconds)
        properties["heartbeat.interval.ms"] = String(heartbeatInterval.milliseconds)
        properties["enable.partition.eof"] = "false"
        properties.merge(client.additionalProperties) { _, new in new }
        return properties
    }
}

extension Duration {
    /// The duration in whole milliseconds, rounded down.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
