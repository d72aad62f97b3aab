import Contracts
import Foundation
import Logging
import PostgresNIO
import RealtimePlatform
import ServiceKit

/// `rider_presence`: the riders' live sockets.
enum RiderPresence: PresenceTable {
    static let table = "rider_presence"
}
