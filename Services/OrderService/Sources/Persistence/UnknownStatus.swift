import Contracts
import Foundation
import Logging
import PostgresNIO
import Realtime
import ServiceKit

/// A status column held a value this build's status type does not have.
struct UnknownStatus: Error, CustomStringConvertible {
    var column: String
    var value: String
    var known: String
    var description: String { "\(column) is '\(value)', which is not a \(known)" }
}
