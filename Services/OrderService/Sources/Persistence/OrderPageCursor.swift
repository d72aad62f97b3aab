import Contracts
import Foundation
import Hummingbird
import Realtime

/// Where a page of orders ended: its last order's creation time (microseconds since 1970, as Postgres keeps it) and
/// id. Sent to clients as the opaque `after` text `<micros>.<id>`; a time outside ``plausibleMicros`` is no cursor.
package struct OrderPageCursor: Sendable, Equatable {
    package var createdMicros: Int64
    package var orderId: UUID

    package init(createdMicros: Int64, orderId: UUID) {
        self.createdMicros = createdMicros
        self.orderId = orderId
    }

    /// The creation times a page can end at: from 1970 to the end of year 9999 (the last instant an ISO-8601 date of
    /// the API can name; Postgres keeps far more, but no order is created outside these).
    package static let plausibleMicros: ClosedRange<Int64> = 0...253_402_300_799_999_999

    /// Reads the `after` text of a previous page; `nil` if it is not one (malformed, or a time out of range).
    package init?(text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let micros = Int64(parts[0]), Self.plausibleMicros.contains(micros),
            let id = UUID(uuidString: String(parts[1]))
        else {
            return nil
        }
        self.init(createdMicros: micros, orderId: id)
    }

    /// Whole seconds and the remaining microseconds of the creation time: each exact as the float8 Postgres
    /// multiplies an interval by (the microseconds alone would not be, past 2^53).
    var createdSecondsAndMicros: (seconds: Int64, micros: Int64) {
        let (seconds, micros) = createdMicros.quotientAndRemainder(dividingBy: 1_000_000)
        return (seconds, micros)
    }

    package var text: String { "\(createdMicros).\(orderId.uuidString.lowercased())" }
}
