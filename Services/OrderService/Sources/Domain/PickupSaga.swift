import Contracts
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import ServiceKit
import ServiceLifecycle

/// The pickup saga's record as admins see it.
package struct PickupSagaView: Codable, Sendable, Equatable {
    package struct Step: Codable, Sendable, Equatable {
        package var done: Bool
        package var at: Date?
        package var failure: String?
    }

    package struct Steps: Codable, Sendable, Equatable {
        package var trackingStarted: Step
        package var customerNotified: Step
        package var vendorUpdated: Step
    }

    /// Where a saga is: every step reported (`completed`), a step cannot succeed (`failed`), or neither yet.
    package enum Status: String, Codable, Sendable {
        case inProgress = "in_progress"
        case completed
        case failed
    }

    package var orderId: String
    package var pickupEventId: String
    package var notificationId: String
    package var startedAt: Date
    package var status: Status
    package var completed: Bool
    package var completedAt: Date?
    package var failedAt: Date?
    /// Why the saga failed, e.g. "the customer could not be notified: no_devices".
    package var failure: String?
    package var steps: Steps
    package var republishCount: Int
    package var lastRepublishedAt: Date?
}

/// The saga's steps: which downstream effect of the pickup reported back.
package enum PickupSagaStep: String, Sendable, CaseIterable {
    case trackingStarted = "tracking_started_at"
    case customerNotified = "customer_notified_at"
    case vendorUpdated = "vendor_updated_at"
}

/// Reads and advances pickup sagas; republishes stalled steps. Step times and the step deadline come from the
/// service's clock.
package struct PickupSagas: Sendable {
    package let database: Database
    package let store: OrderStore
    package let now: Now

    package init(database: Database, store: OrderStore, now: Now) {
        self.database = database
        self.store = store
        self.now = now
    }

    package func view(of orderId: UUID, on connection: PostgresConnection) async throws -> PickupSagaView? {
        try await store.sagas.view(of: orderId, on: connection)
    }

    /// Marks `step` of order `orderId`'s saga done (once); completes the saga when every step is.
    package func complete(_ step: PickupSagaStep, of orderId: UUID, on connection: PostgresConnection) async throws {
        try await store.sagas.markDone(step, of: orderId, at: now(), on: connection)
        try await settle(orderId, on: connection)
    }

    /// The customer's push failed for good: recorded, and never republished (the notification service already
    /// retried). Once the other steps reported, the saga ends failed.
    package func recordNotificationFailure(of orderId: UUID, reason: String, on connection: PostgresConnection)
        async throws
    {
        try await store.sagas.recordNotificationFailure(of: orderId, reason: reason, on: connection)
        try await settle(orderId, on: connection)
    }

    /// Ends the saga once every step reported: completed, or failed if the customer's push failed for good.
    private func settle(_ orderId: UUID, on connection: PostgresConnection) async throws {
        try await store.sagas.settle(orderId, at: now(), on: connection)
    }

    /// Republishes, through the outbox and with their original ids, the events whose steps have not reported back
    /// within `stepTimeout`: the pickup event (tracking, vendor) and the push request (customer). A saga already
    /// republished `maximumRepublishes` times ends failed instead, naming the steps that never reported. Returns
    /// how many sagas it republished for or failed.
    package func republishStalled(stepTimeout: Duration, maximumRepublishes: Int, limit: Int = 100) async throws -> Int
    {
        let cutoff = now() - stepTimeout
        return try await database.transaction { connection in
            let stalled = try await store.sagas.stalled(before: cutoff, limit: limit, on: connection)
            for saga in stalled {
                if saga.republishCount >= maximumRepublishes {
                    try await fail(saga, on: connection)
                } else {
                    try await republish(saga, on: connection)
                }
            }
            return stalled.count
        }
    }

    private func republish(_ saga: PickupSagaStore.Stalled, on connection: PostgresConnection) async throws {
        let orderId = saga.orderId
        if saga.trackingPending || saga.vendorPending,
            let envelope = try await store.envelope(eventId: saga.pickupEventId, on: connection)
        {
            try await store.outbox.enqueueEncoded(
                envelope, eventId: saga.pickupEventId, topic: .ordersEvents, key: orderId.uuidString.lowercased(),
                type: OrderPickedUp.eventType, on: connection, logger: store.logger
            )
        }
        if saga.customerPending {
            let order = try await store.order(orderId, on: connection)
            if let rider = order.rider {
                try await store.outbox.enqueue(
                    OrderWorkflow.pickupNotification(order: order, rider: rider), aggregateId: order.customerId,
                    on: connection, logger: store.logger
                )
            }
        }
        try await store.sagas.markRepublished(orderId, at: now(), on: connection)
        store.logger.warning(
            "republished stalled pickup saga steps",
            metadata: ["order.id": "\(orderId)", "saga.pending": "\(saga.pendingSteps.joined(separator: ", "))"]
        )
    }

    private func fail(_ saga: PickupSagaStore.Stalled, on connection: PostgresConnection) async throws {
        let failure =
            "no report after \(saga.republishCount) republishes from: " + saga.pendingSteps.joined(separator: ", ")
        try await store.sagas.fail(saga.orderId, at: now(), failure: failure, on: connection)
        store.logger.error(
            "pickup saga failed; it is not republished again",
            metadata: ["order.id": "\(saga.orderId)", "saga.failure": "\(failure)"]
        )
    }
}

extension PickupSagaStore.Stalled {
    /// The steps still pending, as the failure and the logs name them.
    fileprivate var pendingSteps: [String] {
        [
            trackingPending ? "tracking started" : nil, vendorPending ? "vendor updated" : nil,
            customerPending ? "customer notified" : nil,
        ].compactMap { $0 }
    }
}

extension PickupSagaView: ResponseEncodable {}
