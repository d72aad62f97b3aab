/// A Kafka topic name. The topics of the system are the static members; their table is in docs/architecture.md.
package struct Topic: RawRepresentable, Hashable, Codable, Sendable, CustomStringConvertible {
    package var rawValue: String
    package init(rawValue: String) { self.rawValue = rawValue }
    package init(_ rawValue: String) { self.rawValue = rawValue }
    package var description: String { rawValue }

    /// Order and service-request lifecycle, keyed by order or request id. Produced by Order.
    package static let ordersEvents = Topic("orders.events")
    /// Offers and their outcomes, keyed by order id. Produced by Allocation.
    package static let allocationEvents = Topic("allocation.events")
    /// Throttled courier positions, keyed by courier id, short retention. Produced by Location.
    package static let couriersPositions = Topic("couriers.positions")
    /// Tracking sessions starting and stopping, keyed by job id. Produced by Location.
    package static let trackingEvents = Topic("tracking.events")
    /// Chat messages and closings, keyed by order id. Produced by Chat.
    package static let chatMessages = Topic("chat.messages")
    /// Riders who lost an order's chat, keyed by order id. Produced by Chat; each chat instance takes their sockets
    /// out of the room (a topic of its own, so that instances do not read every message to find these).
    package static let chatAccess = Topic("chat.access")
    /// Push notifications to send, keyed by user id. Produced by any service.
    package static let notificationsRequests = Topic("notifications.requests")
    /// Push outcomes, keyed by user id. Produced by Notification.
    package static let notificationsEvents = Topic("notifications.events")

    /// How long the broker keeps the topic's messages when the default (days) is too long: positions are
    /// ephemeral (US-072), an hour of them is plenty for a consumer that restarts.
    package var retention: Duration? { self == .couriersPositions ? .seconds(3600) : nil }

    /// Every topic of the system, created at start-up by the services.
    package static let all: [Topic] = [
        .ordersEvents, .allocationEvents, .couriersPositions, .trackingEvents, .chatMessages, .chatAccess,
        .notificationsRequests, .notificationsEvents,
    ]
}
