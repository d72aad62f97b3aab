import Foundation

/// Every event type of the system, by its wire name: how a consumer turns bytes into a typed payload.
package enum EventCatalog {
    /// All payload types; a new event is added here and nowhere else.
    package static let payloadTypes: [any EventPayload.Type] = [
        OrderCreated.self, OrderAccepted.self, OrderReadyForPickup.self, RiderAssigned.self, RiderReassigned.self,
        RiderUnassigned.self,
        RiderAssignmentRefused.self, RiderArrivedAtStore.self, OrderPickedUp.self, OrderDelivered.self,
        OrderCancelled.self, ServiceRequestCreated.self, ServiceRequestAssigned.self,
        ServiceRequestStatusChanged.self,
        OfferSent.self, OfferAccepted.self, OfferRejected.self, OperatorAssignedRider.self,
        OperatorReleasedOrder.self, AllocationFailed.self,
        PositionUpdated.self, TrackingStarted.self, TrackingStopped.self,
        ChatMessageSent.self, ChatAccessRevoked.self, ChatClosed.self,
        PushRequested.self, PushSent.self, PushFailed.self,
    ]

    private static let byType: [String: any EventPayload.Type] = Dictionary(
        uniqueKeysWithValues: payloadTypes.map { ($0.eventType, $0) }
    )

    /// The payload type registered for an envelope `type`.
    package static func payloadType(named type: String) -> (any EventPayload.Type)? { byType[type] }

    /// Decodes an envelope whose payload type is chosen by its `type` field.
    /// - Throws: ``EventDecodingError`` for invalid JSON, an unknown type, or a payload that does not match it.
    package static func decode(_ data: Data) throws -> DecodedEvent {
        do {
            return try ContractCoding.makeDecoder().decode(OnePassEnvelope.self, from: data).event
        } catch let error as EventDecodingError {
            throw error
        } catch {
            throw EventDecodingError(reason: "no valid envelope (\(error))")
        }
    }

    /// An envelope read in one pass over its JSON: the header, then the payload as the type its `type` names
    /// (reading the header first and the whole envelope again cost a second parse of every event).
    private struct OnePassEnvelope: Decodable {
        var event: DecodedEvent

        enum CodingKeys: String, CodingKey { case payload }

        init(from decoder: any Decoder) throws {
            let header = try EventHeader(from: decoder)
            guard let payloadType = byType[header.type] else {
                throw EventDecodingError(reason: "unknown event type '\(header.type)'")
            }
            do {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                event = DecodedEvent(header: header, payload: try Self.payload(payloadType, in: container))
            } catch {
                throw EventDecodingError(reason: "\(header.type) payload does not match its contract (\(error))")
            }
        }

        private static func payload<P: EventPayload>(_ type: P.Type, in container: KeyedDecodingContainer<CodingKeys>)
            throws -> P
        {
            try container.decode(P.self, forKey: .payload)
        }
    }
}
