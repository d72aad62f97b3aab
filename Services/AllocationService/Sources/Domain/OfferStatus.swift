import Contracts
import Foundation
import ServiceKit

/// An offer's status, as stored and as the rider's app sees it.
package enum OfferStatus: String, Codable, Sendable {
    case pending
    case accepted
    case rejected
    case timedOut = "timed_out"
    case unreachable
    case rescinded
}
