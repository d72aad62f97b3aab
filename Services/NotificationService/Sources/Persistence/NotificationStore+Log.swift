import Contracts
import Foundation
import PostgresNIO
import ServiceKit

// The delivery log admins read: a user's notifications with their deliveries, and the SQL reading them.

/// A delivery of a notification to one device, as the log shows it.
struct DeliveryView: Codable, Sendable {
    var token: String
    var platform: String
    var status: DeliveryStatus
    var attempts: Int
    var providerStatus: Int?
    var providerAnswer: String?
    var updatedAt: Date
}

/// A notification and its deliveries, as the log shows it.
struct NotificationView: Codable, Sendable {
    var notificationId: String
    var kind: PushKind
    var title: String
    var body: String
    var priority: String
    var sound: String?
    var ttlSeconds: Int?
    /// Whether the app's background handler runs on arrival (APNs content-available, FCM high priority).
    var wakesApp: Bool
    /// What the app gets with the push (deep link, ids).
    var data: [String: String]
    var status: NotificationStatus
    var createdAt: Date
    var deliveries: [DeliveryView]
}

extension NotificationStore {
    /// `userId`'s latest `limit` notifications, newest first, each with its deliveries.
    func notifications(of userId: String, limit: Int, on connection: PostgresConnection) async throws
        -> [NotificationView]
    {
        let rows = try await connection.queryWhileOpen(
            """
            SELECT notification_id, kind, title, body, priority, sound, ttl_seconds, wakes_app, data::text, status,
                   created_at
            FROM notifications
            WHERE user_id = \(userId) ORDER BY created_at DESC LIMIT \(limit)
            """, logger: logger
        )
        var notifications: [NotificationView] = []
        for try await (id, kind, title, body, priority, sound, ttlSeconds, wakesApp, dataText, status, createdAt)
            in rows.decode(
                (String, String, String, String, String, String?, Int?, Bool, String, NotificationStatus, Date).self)
        {
            notifications.append(
                NotificationView(
                    notificationId: id, kind: PushKind(kind), title: title, body: body, priority: priority,
                    sound: sound, ttlSeconds: ttlSeconds, wakesApp: wakesApp,
                    data: pushData(fromJSON: dataText), status: status, createdAt: createdAt, deliveries: []
                )
            )
        }
        for index in notifications.indices {
            let deliveries = try await connection.queryWhileOpen(
                """
                SELECT token, platform, status, attempts, provider_status, provider_answer, updated_at FROM deliveries
                WHERE notification_id = \(notifications[index].notificationId) ORDER BY id
                """, logger: logger
            )
            for try await (token, platform, status, attempts, providerStatus, answer, updatedAt)
                in deliveries.decode((String, String, DeliveryStatus, Int, Int?, String?, Date).self)
            {
                notifications[index].deliveries.append(
                    DeliveryView(
                        token: token, platform: platform, status: status, attempts: attempts,
                        providerStatus: providerStatus, providerAnswer: answer,
                        updatedAt: updatedAt
                    )
                )
            }
        }
        return notifications
    }
}
