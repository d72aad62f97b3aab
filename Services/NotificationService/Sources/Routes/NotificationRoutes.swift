import Contracts
import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit

/// The device registry and, for admins, the delivery log.
struct NotificationRoutes: Sendable {
    let database: Database

    struct DeviceRegistration: Codable, Sendable {
        var platform: DevicePlatform
        var token: String
    }

    struct Device: Codable, Sendable, ResponseEncodable {
        var token: String
        var platform: DevicePlatform
        var userId: String
    }

    struct DeliveryView: Codable, Sendable {
        var token: String
        var platform: String
        var status: String
        var attempts: Int
        var providerStatus: Int?
        var providerAnswer: String?
        var updatedAt: Date
    }

    struct NotificationView: Codable, Sendable {
        var notificationId: String
        var kind: String
        var title: String
        var body: String
        var priority: String
        var sound: String?
        var ttlSeconds: Int?
        /// What the app gets with the push (deep link, ids).
        var data: [String: String]
        var status: String
        var createdAt: Date
        var deliveries: [DeliveryView]
    }

    struct NotificationLog: Codable, Sendable, ResponseEncodable {
        var userId: String
        var notifications: [NotificationView]
    }

    static let maximumTokenLength = 4096

    func register(on api: RouterGroup<ServiceRequestContext>) {
        api.put("devices") { request, context in
            let identity = try context.requireIdentity()
            let (input, _) = try await request.decodeJSON(DeviceRegistration.self, context: context)
            let token = input.token.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !token.isEmpty, token.count <= Self.maximumTokenLength, !token.contains(where: \.isWhitespace) else {
                throw APIError.validation("'token' must be 1 to \(Self.maximumTokenLength) characters without spaces")
            }
            // A token that moves to another user (a shared phone, a new sign-in) leaves the old one.
            try await database.withConnection { connection in
                try await connection.query(
                    """
                    INSERT INTO devices (token, user_id, platform) VALUES (\(token), \(identity.userId), \(input.platform.rawValue))
                    ON CONFLICT (token) DO UPDATE SET user_id = excluded.user_id, platform = excluded.platform, updated_at = now()
                    """, logger: database.logger
                )
            }
            return Device(token: token, platform: input.platform, userId: identity.userId)
        }
        api.delete("devices/:token") { _, context -> Response in
            let identity = try context.requireIdentity()
            let token = try context.parameters.require("token")
            let removed = try await database.withConnection { connection in
                let rows = try await connection.query(
                    "DELETE FROM devices WHERE token = \(token) AND user_id = \(identity.userId) RETURNING token", logger: database.logger
                )
                var removed = false
                for try await _ in rows { removed = true }
                return removed
            }
            guard removed else { throw APIError.notFound("no such device of yours") }
            return Response(status: .noContent)
        }
        api.get("notifications") { request, context in
            _ = try context.requireIdentity(.admin)
            guard let userId = request.uri.queryParameters["userId"].map(String.init), !userId.isEmpty else {
                throw APIError.validation("'userId' is required")
            }
            let limitText = request.uri.queryParameters["limit"].map(String.init) ?? "20"
            guard let limit = Int(limitText), (1...100).contains(limit) else { throw APIError.validation("'limit' must be 1 to 100") }
            return try await database.withConnection { connection in
                try await log(userId: userId, limit: limit, on: connection)
            }
        }
    }

    func log(userId: String, limit: Int, on connection: PostgresConnection) async throws -> NotificationLog {
        let rows = try await connection.query(
            """
            SELECT notification_id, kind, title, body, priority, sound, ttl_seconds, data::text, status, created_at FROM notifications
            WHERE user_id = \(userId) ORDER BY created_at DESC LIMIT \(limit)
            """, logger: database.logger
        )
        var notifications: [NotificationView] = []
        for try await (id, kind, title, body, priority, sound, ttlSeconds, dataText, status, createdAt)
            in rows.decode((String, String, String, String, String, String?, Int?, String, String, Date).self)
        {
            notifications.append(
                NotificationView(
                    notificationId: id, kind: kind, title: title, body: body, priority: priority, sound: sound, ttlSeconds: ttlSeconds,
                    data: pushData(fromJSON: dataText), status: status, createdAt: createdAt, deliveries: []
                )
            )
        }
        for index in notifications.indices {
            let deliveries = try await connection.query(
                """
                SELECT token, platform, status, attempts, provider_status, provider_answer, updated_at FROM deliveries
                WHERE notification_id = \(notifications[index].notificationId) ORDER BY id
                """, logger: database.logger
            )
            for try await (token, platform, status, attempts, providerStatus, answer, updatedAt)
                in deliveries.decode((String, String, String, Int, Int?, String?, Date).self)
            {
                notifications[index].deliveries.append(
                    DeliveryView(
                        token: token, platform: platform, status: status, attempts: attempts, providerStatus: providerStatus, providerAnswer: answer,
                        updatedAt: updatedAt
                    )
                )
            }
        }
        return NotificationLog(userId: userId, notifications: notifications)
    }
}
