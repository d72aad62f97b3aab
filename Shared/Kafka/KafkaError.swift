/// A failure reported by librdkafka or by this wrapper. `code` is librdkafka's `rd_kafka_resp_err_t` when there
/// is one; `isRetriable` says whether sending the same thing again may succeed.
package struct KafkaError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, in this wrapper's terms.
    package struct Kind: Hashable, Sendable, CustomStringConvertible {
        package var name: String
        package var description: String { name }

        /// A librdkafka property was unknown or had an invalid value.
        package static let configuration = Kind(name: "configuration")
        /// The broker did not acknowledge a message (timed out, refused, or the producer failed).
        package static let deliveryFailed = Kind(name: "deliveryFailed")
        /// No broker answered in time.
        package static let brokerUnavailable = Kind(name: "brokerUnavailable")
        /// An offset commit failed, e.g. after the partition was reassigned to another group member.
        package static let commitFailed = Kind(name: "commitFailed")
        /// Creating a topic failed for another reason than that it exists.
        package static let topicCreationFailed = Kind(name: "topicCreationFailed")
        /// The consumer reported an error it cannot continue after.
        package static let consumerFailed = Kind(name: "consumerFailed")
        /// The client was already closed.
        package static let closed = Kind(name: "closed")
    }

    package var kind: Kind
    /// librdkafka's error code, if the error came from librdkafka.
    package var code: Int32?
    package var message: String
    package var isRetriable: Bool

    package init(_ kind: Kind, code: Int32? = nil, message: String, isRetriable: Bool = false) {
        self.kind = kind
        self.code = code
        self.message = message
        self.isRetriable = isRetriable
    }

    package var description: String {
        let codeText = code.map { " (librdkafka error \($0))" } ?? ""
        return "Kafka \(kind): \(message)\(codeText) [\(KafkaLibrary.description)]"
    }
}
