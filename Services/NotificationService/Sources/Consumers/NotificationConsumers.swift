import Contracts
import Foundation
import PostgresNIO
import ServiceKit

/// notifications.requests, in batches: accepted in one transaction, their deliveries dispatched once it commits.
package struct PushRequestConsumer: Sendable {
    let workflow: DeliveryWorkflow
    let dispatcher: PushDispatcher

    /// Accepts the batch's ``PushRequested``s; returns their deliveries' dispatch, for after the commit, if any.
    package func handle(_ events: [DecodedEvent], on connection: PostgresConnection) async throws
        -> EventConsumer.FollowUp?
    {
        let requests = events.compactMap { $0.payload(as: PushRequested.self) }
        if requests.isEmpty { return nil }
        let deliveries = try await workflow.accept(requests, on: connection)
        if deliveries.isEmpty { return nil }
        return { @Sendable [dispatcher] in dispatcher.enqueue(deliveries) }
    }
}
