import Foundation

/// Where a room's stream stands: its epoch (a new one whenever the store began the stream again, so a reset store
/// is never taken for continuity) and the offset of its last emit. A room nothing was emitted to has no epoch and
/// offset 0.
package struct StreamPosition: Sendable, Hashable, CustomStringConvertible {
    package var epoch: String?
    package var offset: Int64

    package init(epoch: String?, offset: Int64) {
        self.epoch = epoch
        self.offset = offset
    }

    /// The position of a room with no stream yet.
    package static let start = StreamPosition(epoch: nil, offset: 0)

    package var description: String { "\(epoch ?? "-"):\(offset)" }
}
