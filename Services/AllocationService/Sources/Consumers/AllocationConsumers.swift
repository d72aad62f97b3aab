import Contracts
import Foundation
import PostgresNIO
import ServiceKit

/// orders.events: each order's effect on its allocation, told to the riders in the same transaction.
package struct OrderAllocationConsumer: Sendable {
    let workflow: AllocationWorkflow
    let notifier: RiderNotifier

    /// Whether allocation follows the order event: the others are skipped without a transaction.
    package func wants(_ event: DecodedEvent) -> Bool { workflow.step(forOrderEvent: event) != nil }

    /// Applies the order event and writes the riders' notices in `connection`'s transaction.
    package func handle(_ event: DecodedEvent, on connection: PostgresConnection) async throws {
        try await notifier.tell(try await workflow.apply(orderEvent: event, on: connection), on: connection)
    }
}

/// notifications.events: the outcomes of pending offers' pushes, told to the riders in the same transaction.
package struct OfferPushConsumer: Sendable {
    let workflow: AllocationWorkflow
    let notifier: RiderNotifier

    /// Whether the event is an offer push's outcome: every other push's is skipped without a transaction.
    package static func wants(_ event: DecodedEvent) -> Bool {
        (event.payload(as: PushSent.self)?.kind ?? event.payload(as: PushFailed.self)?.kind) == .offer
    }

    /// Applies the push outcome and writes the riders' notices in `connection`'s transaction.
    package func handle(_ event: DecodedEvent, on connection: PostgresConnection) async throws {
        try await notifier.tell(try await workflow.pushOutcome(event, on: connection), on: connection)
    }
}

/// couriers.positions: a rider's newer position moves them (``AllocationWorkflow/moved(_:on:)``).
package struct RiderPositionConsumer: Sendable {
    let workflow: AllocationWorkflow

    /// Moves the rider of a ``PositionUpdated``; other events are ignored.
    package func handle(_ event: DecodedEvent, on connection: PostgresConnection) async throws {
        if let position = event.payload(as: PositionUpdated.self) {
            try await workflow.moved(position, on: connection)
        }
    }
}
