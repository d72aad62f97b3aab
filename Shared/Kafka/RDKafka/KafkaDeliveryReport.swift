/// What the broker answered for one produced message.
package struct KafkaDeliveryReport: Sendable, Equatable {
    package var partition: Int32
    package var offset: Int64
}
