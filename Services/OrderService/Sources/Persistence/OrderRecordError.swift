import Contracts
import Foundation
import Hummingbird
import Realtime

/// A record the order service was asked for and does not have, or one it already has.
package enum OrderRecordError: Error, Equatable, Sendable {
    case noOrder(UUID)
    case noServiceRequest(UUID)
    case vendorExists(String)
}
