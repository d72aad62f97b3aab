import CRdKafka
import Logging

/// A topic to create: name, partitions and replication factor.
package struct KafkaTopicSpecification: Sendable {
    package var name: String
    package var partitions: Int
    package var replicationFactor: Int
    /// Topic configuration, e.g. `retention.ms`.
    package var configs: [String: String]
    package init(name: String, partitions: Int = 3, replicationFactor: Int = 1, configs: [String: String] = [:]) {
        self.name = name
        self.partitions = partitions
        self.replicationFactor = replicationFactor
        self.configs = configs
    }
}

/// Cluster administration: creating the topics a service needs at start-up.
package enum KafkaAdmin {
    /// Creates the topics that do not exist yet; existing ones are left as they are.
    /// - Throws: ``KafkaError`` `.topicCreationFailed` or `.brokerUnavailable`.
    package static func createTopics(
        _ topics: [KafkaTopicSpecification], client configuration: KafkaClientConfiguration,
        timeout: Duration = .seconds(10), logger: Logger
    ) async throws {
        guard !topics.isEmpty else { return }
        var properties = configuration.baseProperties
        properties.merge(configuration.additionalProperties) { _, new in new }
        let client = try RDKafkaClient(kind: .producer, properties: properties, logger: logger)
        let created = try await runBlocking { () throws(KafkaError) -> [String] in
            try createTopics(topics, client: client, timeout: timeout)
        }
        if !created.isEmpty {
            logger.info("created Kafka topics", metadata: ["kafka.topics": "\(created.joined(separator: ","))"])
        }
    }

    private static func createTopics(
        _ topics: [KafkaTopicSpecification], client: RDKafkaClient, timeout: Duration
    ) throws(KafkaError) -> [String] {
        let queue = rd_kafka_queue_new(client.handle)
        defer { rd_kafka_queue_destroy(queue) }
        var newTopics: [OpaquePointer?] = []
        defer { newTopics.forEach { rd_kafka_NewTopic_destroy($0) } }
        for topic in topics {
            var error = [CChar](repeating: 0, count: 256)
            guard
                let newTopic = rd_kafka_NewTopic_new(
                    topic.name, Int32(topic.partitions), Int32(topic.replicationFactor), &error, error.count
                )
            else {
                throw KafkaError(
                    .topicCreationFailed, message: "invalid topic \(topic.name): \(String(errorBuffer: error))"
                )
            }
            for (name, value) in topic.configs.sorted(by: { $0.key < $1.key }) {
                rd_kafka_NewTopic_set_config(newTopic, name, value)
            }
            newTopics.append(newTopic)
        }
        let options = rd_kafka_AdminOptions_new(client.handle, RD_KAFKA_ADMIN_OP_CREATETOPICS)
        defer { rd_kafka_AdminOptions_destroy(options) }
        var error = [CChar](repeating: 0, count: 256)
        rd_kafka_AdminOptions_set_operation_timeout(options, Int32(timeout.milliseconds), &error, error.count)
        rd_kafka_AdminOptions_set_request_timeout(options, Int32(timeout.milliseconds), &error, error.count)
        newTopics.withUnsafeMutableBufferPointer { buffer in
            rd_kafka_CreateTopics(client.handle, buffer.baseAddress, buffer.count, options, queue)
        }
        guard let event = rd_kafka_queue_poll(queue, Int32(timeout.milliseconds + 1_000)) else {
            throw KafkaError(
                .brokerUnavailable, message: "no answer to CreateTopics from \(client.context.brokers)",
                isRetriable: true
            )
        }
        defer { rd_kafka_event_destroy(event) }
        let eventError = rd_kafka_event_error(event)
        guard eventError == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(
                eventError == RD_KAFKA_RESP_ERR__TIMED_OUT ? .brokerUnavailable : .topicCreationFailed,
                code: eventError.rawValue, message: String(cString: rd_kafka_event_error_string(event)),
                isRetriable: true
            )
        }
        guard let result = rd_kafka_event_CreateTopics_result(event) else { return [] }
        var count = 0
        guard let results = rd_kafka_CreateTopics_result_topics(result, &count) else { return [] }
        var created: [String] = []
        for index in 0..<count {
            let topicResult = results[index]
            let name = String(cString: rd_kafka_topic_result_name(topicResult))
            let code = rd_kafka_topic_result_error(topicResult)
            switch code {
            case RD_KAFKA_RESP_ERR_NO_ERROR:
                created.append(name)
            case RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS:
                continue
            default:
                let message = rd_kafka_topic_result_error_string(topicResult).map { String(cString: $0) } ?? ""
                throw KafkaError(
                    .topicCreationFailed, code: code.rawValue, message: "topic \(name): \(message)"
                )
            }
        }
        return created
    }
}
