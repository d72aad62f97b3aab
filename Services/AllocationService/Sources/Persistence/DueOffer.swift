import Contracts
import Foundation
import Logging
import PostgresNIO
import RealtimePlatform
import ServiceKit

/// A pending offer due for a deadline (or rescinded, or declined by going offline).
struct DueOffer: Sendable {
    var offerId: UUID
    var orderId: String
    var riderId: String
}
