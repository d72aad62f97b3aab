/// Where a notification stands, as `notifications.status` holds it and the delivery log shows it.
package enum NotificationStatus: String, Codable, Sendable, CaseIterable {
    /// Its deliveries are under way.
    case pending
    /// At least one device got it.
    case sent
    /// None of its devices got it.
    case failed
    /// Its user had no device when it arrived, so nothing was pushed.
    case noDevices = "no_devices"
}
