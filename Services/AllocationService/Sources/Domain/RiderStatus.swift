import Contracts
import Foundation
import ServiceKit

/// A rider's availability, as stored and as the rider's app sees it.
package enum RiderStatus: String, Codable, Sendable {
    case offline
    case online
    /// Holding a pending offer.
    case offered
    /// On an accepted order until it ends.
    case delivering
}
