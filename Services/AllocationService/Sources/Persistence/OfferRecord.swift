import Contracts
import Foundation
import Logging
import PostgresNIO
import RealtimePlatform
import ServiceKit

/// An offer as its rider answers it.
struct OfferRecord: Sendable {
    var orderId: String
    var status: OfferStatus
    var expiresAt: Date
}
