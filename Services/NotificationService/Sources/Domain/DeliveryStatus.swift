/// Where a delivery (a notification to one device) stands, as `deliveries.status` holds it and the log shows it.
package enum DeliveryStatus: String, Codable, Sendable, CaseIterable {
    /// Due at `next_attempt_at`.
    case pending
    /// Leased by an instance for one attempt until `leased_until`.
    case sending
    /// The provider took it.
    case sent
    /// Given up (a dead letter keeps why).
    case failed
    /// The provider said the device's token is dead; the device was forgotten.
    case tokenRemoved = "token_removed"
}
