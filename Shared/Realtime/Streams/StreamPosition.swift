import Foundation

/// Where a room's stream stands: its epoch (a new one whenever the store began the stream again, so a reset store
/// is never taken for continuity) and the offset of its last emit. A room nothing was emitted to has no epoch and
/// offset 0.
public struct StreamPosition: Sendable, Hashable, CustomStringConvertible {
    /// The stream's epoch (lower-case letters and digits), or nil for a room with no stream.
    public var epoch: String?
    /// The offset of the stream's last emit: 1 for its first emit, 0 for a room with no stream.
    public var offset: Int64

    /// The position `offset` in the stream of `epoch`.
    public init(epoch: String?, offset: Int64) {
        self.epoch = epoch
        self.offset = offset
    }

    /// The position of a room with no stream yet.
    public static let start = StreamPosition(epoch: nil, offset: 0)

    public var description: String { "\(epoch ?? "-"):\(offset)" }
}
