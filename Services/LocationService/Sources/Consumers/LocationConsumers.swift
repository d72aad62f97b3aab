import Contracts
import Foundation
import PostgresNIO
import ServiceKit

/// orders.events: tracking jobs follow their orders; watchers are told in the transaction and after it commits.
package struct TrackingJobConsumer: Sendable {
    let workflow: TrackingWorkflow
    let hub: TrackingHub

    /// Whether tracking follows the order event: the others are skipped without a transaction.
    package func wants(_ event: DecodedEvent) -> Bool { workflow.step(forOrderEvent: event) != nil }

    /// Applies the order event and announces the changed jobs; returns the hub's work for after the commit, if any.
    package func handle(_ event: DecodedEvent, on connection: PostgresConnection) async throws
        -> EventConsumer.FollowUp?
    {
        let changed = try await hub.announce(
            try await workflow.apply(orderEvent: event, on: connection), on: connection)
        if changed.isEmpty { return nil }
        return { @Sendable [hub] in await hub.after(changed) }
    }
}

/// couriers.positions, on every instance: other instances' positions, remembered for watchers who join here.
package struct CourierPositionConsumer: Sendable {
    let hub: TrackingHub

    /// Remembers the courier's position of a ``PositionUpdated``; other events are ignored.
    package func handle(_ event: DecodedEvent) {
        if let update = event.payload(as: PositionUpdated.self) { hub.learn(update) }
    }
}
