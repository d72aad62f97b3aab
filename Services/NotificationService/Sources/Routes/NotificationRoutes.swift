import Contracts
import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit

/// The device registry and, for admins, the delivery log.
struct NotificationRoutes: Sendable {
    let database: Database
    /// Devices kept per user; the least recently registered go first.
    let maximumDevicesPerUser: Int

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
        /// Whether the app's background handler runs on arrival (APNs content-available, FCM high priority).
        var wakesApp: Bool
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

    func register(on api: RouterGroup<ServiceRequestContext>) {
        api.put("devices") { request, context in
            let identity = try context.requireIdentity()
            let (input, _) = try await request.decodeJSON(DeviceRegistration.self, context: context)
            let token: String
            do throws(DeviceRules.TokenProblem) {
                token = try DeviceRules.validToken(input.token, platform: input.platform)
            } catch {
                throw APIError.validation(error.description)
            }
            let previousOwner = try await database.transaction { connection in
                try await register(token, platform: input.platform, for: identity.userId, on: connection)
            }
            // A token that moves to another user (a shared phone, a new sign-in) leaves the old one, with a trace.
            if let previousOwner, previousOwner != identity.userId {
                database.logger.notice(
                    "a device token moved to another user",
                    metadata: [
                        "device.token": "\(DeviceRules.redacted(token))", "user.previous": "\(previousOwner)",
                        "user.id": "\(identity.userId)",
                    ]
                )
            }
            return Device(token: token, platform: input.platform, userId: identity.userId)
        }
        api.delete("devices/:token") { _, context -> Response in
            let identity = try context.requireIdentity()
            let token = try context.parameters.require("token")
            let removed = try await database.withConnection { connection in
                let rows = try await connection.queryWhileOpen(
                    "DELETE FROM devices WHERE token = \(token) AND user_id = \(identity.userId) RETURNING token",
                    logger: database.logger
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
            guard let userText = request.uri.queryParameters["userId"].map(String.init), !userText.isEmpty else {
                throw APIError.validation("'userId' is required")
            }
            let userId = try Validate.identifier(userText, "userId")
            let limit = try Validate.pageLimit(request.uri.queryParameters.get("limit"), default: 20)
            return try await database.withConnection { connection in
                try await log(userId: userId, limit: limit, on: connection)
            }
        }
    }

    /// Registers `token` for `userId` and drops the user's least recently registered devices beyond the cap;
    /// returns the user the token belonged to before, if any.
    func register(
        _ token: String, platform: DevicePlatform, for userId: String, on connection: PostgresConnection
    ) async throws -> String? {
        var previousOwner: String?
        let owners = try await connection.queryWhileOpen(
            "SELECT user_id FROM devices WHERE token = \(token) FOR UPDATE", logger: database.logger)
        for try await owner in owners.decode(String.self) { previousOwner = owner }
        try await connection.queryWhileOpen(
            """
            INSERT INTO devices (token, user_id, platform) VALUES (\(token), \(userId), \(platform.rawValue))
            ON CONFLICT (token) DO UPDATE SET user_id = excluded.user_id, platform = excluded.platform,
                updated_at = now()
            """, logger: database.logger
        )
        try await connection.queryWhileOpen(
            """
            DELETE FROM devices WHERE token IN (
                SELECT token FROM devices WHERE user_id = \(userId)
                ORDER BY updated_at DESC, token OFFSET \(maximumDevicesPerUser)
            )
            """, logger: database.logger
        )
        return previousOwner
    }

    func log(userId: String, limit: Int, on connection: PostgresConnection) async throws -> NotificationLog {
        let rows = try await connection.queryWhileOpen(
            """
            SELECT notification_id, kind, title, body, priority, sound, ttl_seconds, wakes_app, data::text, status,
                   created_at
            FROM notifications
            WHERE user_id = \(userId) ORDER BY created_at DESC LIMIT \(limit)
            """, logger: database.logger
        )
        var notifications: [NotificationView] = []
        for try await (id, kind, title, body, priority, sound, ttlSeconds, wakesApp, dataText, status, createdAt)
            in rows.decode((String, String, String, String, String, String?, Int?, Bool, String, String, Date).self)
        {
            notifications.append(
                NotificationView(
                    notificationId: id, kind: kind, title: title, body: body, priority: priority, sound: sound,
                    ttlSeconds: ttlSeconds, wakesApp: wakesApp,
                    data: pushData(fromJSON: dataText), status: status, createdAt: createdAt, deliveries: []
                )
            )
        }
        for index in notifications.indices {
            let deliveries = try await connection.queryWhileOpen(
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
                        token: token, platform: platform, status: status, attempts: attempts,
                        providerStatus: providerStatus, providerAnswer: answer,
                        updatedAt: updatedAt
                    )
                )
            }
        }
        return NotificationLog(userId: userId, notifications: notifications)
    }
}
