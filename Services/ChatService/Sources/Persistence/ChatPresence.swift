import Contracts
import Foundation
import Logging
import PostgresNIO
import RealtimePlatform
import ServiceKit

/// `chat_presence`: the chat sockets in each order's room.
enum ChatPresence: PresenceTable {
    static let table = "chat_presence"
    static let roomColumn = "order_id"
}
