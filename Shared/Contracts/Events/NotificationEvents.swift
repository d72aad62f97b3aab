import Foundation

// One file per area's topics: the payloads on notifications.requests and notifications.events, which travel together.

/// How urgently a push must reach the device.
package enum PushPriority: String, Codable, Sendable, CaseIterable {
    case high
    case normal
}

/// What a push is about, sent in the notification events and kept in the notification log. Extensible like
/// ``ErrorCode``: the notification service pushes any kind; the system's own are the static members.
package struct PushKind: StringVocabulary {
    package var rawValue: String
    package init(rawValue: String) { self.rawValue = rawValue }

    /// A rider's new offer (allocation).
    package static let offer: PushKind = "offer"
    /// A chat message for an app in the background (chat).
    package static let chatMessage: PushKind = "chat_message"
    /// The customer's order was picked up (order, a step of the pickup saga).
    package static let orderPickedUp: PushKind = "order_picked_up"
    /// The system took a rider Offline, with the reason (allocation).
    package static let riderOffline: PushKind = "rider_offline"
    /// The order a rider was delivering was cancelled (allocation).
    package static let orderCancelled: PushKind = "order_cancelled"
    /// An operator gave a rider an order (allocation).
    package static let orderAssigned: PushKind = "order_assigned"
    /// An operator took a rider's order away, to another rider or back to allocation (allocation).
    package static let orderUnassigned: PushKind = "order_unassigned"
    /// A technician's travel mode switched itself off after the time limit (location).
    package static let travelModeOff: PushKind = "travel_mode_off"
}

/// Ask the Notification service to push to every device of a user (notifications.requests, keyed by user id).
package struct PushRequested: EventPayload {
    package static let eventType = "PushRequested"
    package static let topic = Topic.notificationsRequests
    /// Deduplication key: the same id is pushed once.
    package var notificationId: String
    package var userId: String
    /// What it is about, e.g. ``PushKind/orderPickedUp``.
    package var kind: PushKind
    package var title: String
    package var body: String
    /// Passed to the app as is; holds the deep link (`link`) and ids.
    package var data: [String: String]
    package var priority: PushPriority
    package var collapseKey: String?
    package var ttlSeconds: Int?
    package var sound: String?
    /// Echoed in PushSent / PushFailed so the requester can match the outcome (e.g. the order id).
    package var correlationId: String?
    /// The app's background handler must run when it arrives (APNs `content-available`, FCM high priority with
    /// the data): an offer's push, whose handler confirms receipt. Absent means false.
    package var wakesApp: Bool?
    package init(
        notificationId: String, userId: String, kind: PushKind, title: String, body: String, data: [String: String],
        priority: PushPriority, collapseKey: String? = nil, ttlSeconds: Int? = nil, sound: String? = nil,
        correlationId: String? = nil, wakesApp: Bool = false
    ) {
        self.wakesApp = wakesApp ? true : nil
        self.notificationId = notificationId
        self.userId = userId
        self.kind = kind
        self.title = title
        self.body = body
        self.data = data
        self.priority = priority
        self.collapseKey = collapseKey
        self.ttlSeconds = ttlSeconds
        self.sound = sound
        self.correlationId = correlationId
    }
}

package struct PushSent: EventPayload {
    package static let eventType = "PushSent"
    package static let topic = Topic.notificationsEvents
    package var notificationId: String
    package var userId: String
    package var kind: PushKind
    package var correlationId: String?
    package var deviceCount: Int
    package var sentAt: Date
    package init(
        notificationId: String, userId: String, kind: PushKind, correlationId: String?, deviceCount: Int, sentAt: Date
    ) {
        self.notificationId = notificationId
        self.userId = userId
        self.kind = kind
        self.correlationId = correlationId
        self.deviceCount = deviceCount
        self.sentAt = sentAt
    }
}

package struct PushFailed: EventPayload {
    package static let eventType = "PushFailed"
    package static let topic = Topic.notificationsEvents
    package var notificationId: String
    package var userId: String
    package var kind: PushKind
    package var correlationId: String?
    package var reason: String
    package var failedAt: Date
    package init(
        notificationId: String, userId: String, kind: PushKind, correlationId: String?, reason: String, failedAt: Date
    ) {
        self.notificationId = notificationId
        self.userId = userId
        self.kind = kind
        self.correlationId = correlationId
        self.reason = reason
        self.failedAt = failedAt
    }

    /// The user has no registered device.
    package static let noDevicesReason = "no_devices"
    /// The provider said the (last) device token is dead.
    package static let invalidTokenReason = "device token no longer valid"

    /// Whether the push failed because no device could take it (no device, dead tokens), as opposed to the
    /// provider or our credentials failing: only the former says the user cannot be reached.
    package var isUndeliverableToDevices: Bool {
        reason == Self.noDevicesReason || reason == Self.invalidTokenReason
    }
}
