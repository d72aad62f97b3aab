import Foundation

// The envelope as written and as read (its payload, header, decoded form and decoding error), which change together.

/// A domain event's payload: its wire name, the topic it travels on and the schema version it is written with.
package protocol EventPayload: Codable, Sendable, Equatable {
    /// The envelope's `type`, e.g. `OrderPickedUp`.
    static var eventType: String { get }
    /// The topic every event of this type is published to.
    static var topic: Topic { get }
    /// Bumped when the payload changes incompatibly; consumers read it from the envelope.
    static var schemaVersion: Int { get }
}

extension EventPayload {
    package static var schemaVersion: Int { 1 }
}

/// The envelope every message on every topic travels in. Keyed on the topic by `aggregateId`, so one
/// aggregate's events stay in order.
package struct EventEnvelope<Payload: EventPayload>: Codable, Sendable, Equatable {
    package var eventId: UUID
    package var type: String
    package var aggregateId: String
    package var occurredAt: Date
    package var schemaVersion: Int
    package var payload: Payload

    /// An envelope stamped `occurredAt`: a service passes its injected clock's time, never the machine's directly.
    package init(eventId: UUID = UUID(), aggregateId: String, occurredAt: Date, payload: Payload) {
        self.eventId = eventId
        self.type = Payload.eventType
        self.aggregateId = aggregateId
        self.occurredAt = occurredAt
        self.schemaVersion = Payload.schemaVersion
        self.payload = payload
    }
}

/// The envelope's fields without the payload: what a consumer reads first to decide how to decode the rest.
package struct EventHeader: Codable, Sendable, Equatable {
    package var eventId: UUID
    package var type: String
    package var aggregateId: String
    package var occurredAt: Date
    package var schemaVersion: Int
}

/// An envelope whose payload type was chosen from its `type` by ``EventCatalog``.
package struct DecodedEvent: Sendable {
    package var header: EventHeader
    package var payload: any EventPayload

    /// The payload as `T`, or nil if the event is of another type.
    package func payload<T: EventPayload>(as type: T.Type) -> T? { payload as? T }
}

/// Why a message could not be read as an event. Consumers log it and skip the message.
package struct EventDecodingError: Error, CustomStringConvertible {
    package var reason: String
    package var description: String { "undecodable event: \(reason)" }
}
