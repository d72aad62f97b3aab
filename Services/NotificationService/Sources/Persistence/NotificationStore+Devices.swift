import Contracts
import PostgresNIO
import ServiceKit

// The device registry's SQL, for the routes that register and remove devices.

extension NotificationStore {
    /// The user device `token` belongs to, its row locked for the rest of the transaction; nil if none.
    func owner(ofDevice token: String, on connection: PostgresConnection) async throws -> String? {
        var previousOwner: String?
        let owners = try await connection.queryWhileOpen(
            "SELECT user_id FROM devices WHERE token = \(token) FOR UPDATE", logger: logger)
        for try await owner in owners.decode(String.self) { previousOwner = owner }
        return previousOwner
    }

    /// Registers device `token` for `userId`, taking it from its previous user if it had one.
    func saveDevice(
        _ token: String, platform: DevicePlatform, for userId: String, on connection: PostgresConnection
    ) async throws {
        try await connection.queryWhileOpen(
            """
            INSERT INTO devices (token, user_id, platform) VALUES (\(token), \(userId), \(platform.rawValue))
            ON CONFLICT (token) DO UPDATE SET user_id = excluded.user_id, platform = excluded.platform,
                updated_at = now()
            """, logger: logger
        )
    }

    /// Drops `userId`'s least recently registered devices beyond the `maximum` most recent.
    func dropDevices(of userId: String, beyond maximum: Int, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            DELETE FROM devices WHERE token IN (
                SELECT token FROM devices WHERE user_id = \(userId)
                ORDER BY updated_at DESC, token OFFSET \(maximum)
            )
            """, logger: logger
        )
    }

    /// Removes device `token` if it is `userId`'s; whether it was.
    func removeDevice(token: String, of userId: String, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.queryWhileOpen(
            "DELETE FROM devices WHERE token = \(token) AND user_id = \(userId) RETURNING token",
            logger: logger
        )
        var removed = false
        for try await _ in rows { removed = true }
        return removed
    }
}
