import Contracts
import Foundation
import Logging
import PostgresNIO

/// Writes events into the outbox table inside the caller's transaction. Nothing is published from a request
/// handler: the ``OutboxRelay`` publishes committed rows, so a rolled-back transaction never emits anything.
package struct Outbox: Sendable {
    /// The NOTIFY channel that wakes the relay, one per schema.
    package let channel: String
    /// The clock that stamps the envelopes the outbox makes (``enqueue(_:aggregateId:key:on:logger:)``,
    /// ``entry(_:aggregateId:key:)``): the platform's, so tests set the time of every event.
    package let now: Now

    package init(schema: String, now: Now) {
        self.channel = "\(schema)_outbox"
        self.now = now
    }

    /// The largest encoded event the outbox takes, in bytes: under librdkafka's default `message.max.bytes`
    /// (1,000,000) and Kafka's `max.message.bytes` (1,048,588), with room for the key and the record's overhead.
    package static let maximumEventBytes = 900_000

    /// Throws ``EventTooLarge`` for an encoded event over ``maximumEventBytes``: refused before it is written,
    /// so no request can leave a row the broker would refuse.
    package static func checkSize(of payload: String, type: String) throws(EventTooLarge) {
        let bytes = payload.utf8.count
        guard bytes <= maximumEventBytes else {
            throw EventTooLarge(eventType: type, bytes: bytes, maximumBytes: maximumEventBytes)
        }
    }

    /// Adds `envelope` to the outbox on `connection`, which must be in a transaction.
    /// - Parameter key: the Kafka message key; defaults to the envelope's aggregate id.
    package func enqueue<Payload: EventPayload>(
        _ envelope: EventEnvelope<Payload>, key: String? = nil, on connection: PostgresConnection, logger: Logger
    ) async throws {
        try await enqueue([(envelope, key)], on: connection, logger: logger)
    }

    /// Adds envelopes (each with its Kafka message key, or nil for its aggregate id) in one statement, in order.
    package func enqueue<Payload: EventPayload>(
        _ envelopes: [(envelope: EventEnvelope<Payload>, key: String?)], on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        try await enqueue(envelopes.map { try OutboxEntry($0.envelope, key: $0.key) }, on: connection, logger: logger)
    }

    /// Adds encoded events in one statement, in order.
    package func enqueue(_ entries: [OutboxEntry], on connection: PostgresConnection, logger: Logger) async throws {
        if entries.isEmpty { return }
        var bindings = PostgresBindings()
        appendWriteArguments(entries, to: &bindings)
        try await connection.queryWhileOpen(EnqueueEvents.self, bindings, logger: logger)
    }

    /// The call of the `outbox_write` function (migration 0007) inside a statement of the caller's (a change, its
    /// emit and its events in one round trip), its six parameters numbered from `first`; their values are
    /// ``appendWriteArguments(_:to:)``'s.
    package static func writeCall(parametersFrom first: Int) -> String {
        sqlCall(
            "outbox_write", parameterTypes: ["uuid[]", "text[]", "text[]", "text[]", "text[]", "text"], from: first)
    }

    /// Appends the values of ``writeCall(parametersFrom:)`` that write `entries` to `bindings`.
    package func appendWriteArguments(_ entries: [OutboxEntry], to bindings: inout PostgresBindings) {
        bindings.append(entries.map(\.eventId))
        bindings.append(entries.map(\.topic))
        bindings.append(entries.map(\.key))
        bindings.append(entries.map(\.type))
        bindings.append(entries.map(\.payload))
        bindings.append(channel)
    }

    /// Adds an already encoded envelope (e.g. an event republished with its original id).
    package func enqueueEncoded(
        _ envelope: String, eventId: UUID, topic: Topic, key: String, type: String, on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        try Self.checkSize(of: envelope, type: type)
        try await connection.queryWhileOpen(
            """
            INSERT INTO outbox (event_id, topic, message_key, event_type, payload)
            VALUES (\(eventId), \(topic.rawValue), \(key), \(type), \(envelope))
            """, logger: logger
        )
        try await connection.queryWhileOpen("SELECT pg_notify(\(channel), '')", logger: logger)
    }

    /// Wraps `payload` in an envelope for `aggregateId`, stamped now, and adds it to the outbox.
    package func enqueue<Payload: EventPayload>(
        _ payload: Payload, aggregateId: String, key: String? = nil, on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        try await enqueue([try entry(payload, aggregateId: aggregateId, key: key)], on: connection, logger: logger)
    }

    /// `payload` in a new envelope for `aggregateId`, stamped now, encoded for ``enqueue(_:on:logger:)``.
    package func entry<Payload: EventPayload>(_ payload: Payload, aggregateId: String, key: String? = nil) throws
        -> OutboxEntry
    {
        try OutboxEntry(EventEnvelope(aggregateId: aggregateId, occurredAt: now(), payload: payload), key: key)
    }
}

/// Writes events to the outbox and tells the relay on commit, in one round trip (the NOTIFY is delivered once per
/// transaction however many rows were written): ``Outbox/writeCall(parametersFrom:)``'s parameters from $1.
enum EnqueueEvents: PreparedStatementText {
    static let sql = "SELECT " + Outbox.writeCall(parametersFrom: 1)
}

/// An event encoded for the outbox, checked against ``Outbox/maximumEventBytes``.
package struct OutboxEntry: Sendable {
    package var eventId: UUID
    package var topic: String
    /// The Kafka message key.
    package var key: String
    package var type: String
    package var payload: String

    /// `envelope` encoded, keyed by `key` (by default its aggregate id); throws ``EventTooLarge`` for one too large.
    package init<Payload: EventPayload>(_ envelope: EventEnvelope<Payload>, key: String? = nil) throws {
        let payload = String(decoding: try ContractCoding.encode(envelope), as: UTF8.self)
        try Outbox.checkSize(of: payload, type: envelope.type)
        self.eventId = envelope.eventId
        self.topic = Payload.topic.rawValue
        self.key = key ?? envelope.aggregateId
        self.type = envelope.type
        self.payload = payload
    }
}
