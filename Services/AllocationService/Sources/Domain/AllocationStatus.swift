import Contracts
import Foundation
import ServiceKit

/// Where the allocation of an order stands.
package enum AllocationStatus: String, Codable, Sendable {
    /// Offered to a rider, or about to be.
    case searching
    /// Nobody was eligible; tried again at `next_attempt_at`.
    case waiting
    case assigned
    /// Picked up by its rider: no longer re-assignable.
    case inTransit = "in_transit"
    case cancelled
    case completed
}
