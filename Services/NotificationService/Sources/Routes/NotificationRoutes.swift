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

    /// The device registry's and the delivery log's SQL.
    let store: NotificationStore

    struct DeviceRegistration: Codable, Sendable {
        var platform: DevicePlatform
        var token: String
    }

    struct Device: Codable, Sendable, ResponseEncodable {
        var token: String
        var platform: DevicePlatform
        var userId: String
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
                try await store.removeDevice(token: token, of: identity.userId, on: connection)
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
            let notifications = try await database.withConnection { connection in
                try await store.notifications(of: userId, limit: limit, on: connection)
            }
            return NotificationLog(userId: userId, notifications: notifications)
        }
    }

    /// Registers `token` for `userId` and drops the user's least recently registered devices beyond the cap;
    /// returns the user the token belonged to before, if any.
    func register(
        _ token: String, platform: DevicePlatform, for userId: String, on connection: PostgresConnection
    ) async throws -> String? {
        let previousOwner = try await store.owner(ofDevice: token, on: connection)
        try await store.saveDevice(token, platform: platform, for: userId, on: connection)
        try await store.dropDevices(of: userId, beyond: maximumDevicesPerUser, on: connection)
        return previousOwner
    }
}
