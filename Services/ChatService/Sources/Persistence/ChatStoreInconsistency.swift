import Contracts
import Foundation
import Logging
import PostgresNIO
import RealtimePlatform
import ServiceKit

/// A message insert that neither stored the message nor found the one stored before with its client id.
struct ChatStoreInconsistency: Error, CustomStringConvertible {
    var orderId: String
    var clientMessageId: String?
    var description: String {
        "message \(clientMessageId ?? "-") of order \(orderId) was neither stored nor found"
    }
}
