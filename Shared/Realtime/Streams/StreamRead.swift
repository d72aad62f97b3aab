import Foundation

// Reading a room's stream after a position: the read, its plan, what a recovering client gets of a room, and why a
// read cannot continue. Four small types that are only ever read together.

/// What a store holds of a room's stream after a position.
public enum StreamRead: Sendable, Equatable {
    /// The emits after the position, in order (all of them up to `top`, the stream's position when it was read,
    /// unless they came to more than the byte limit).
    case emits([StreamEmit], top: StreamPosition)
    /// Continuity cannot be shown: the stream has another epoch, or an emit after the position is no longer held.
    case unavailable(StreamGap)

    /// What a read after `position` of a stream standing at `top` (nil: the room has no stream) takes: decided
    /// without its emits, or the emits after an offset, given to ``found(_:after:top:byteLimit:)``.
    public static func plan(after position: StreamPosition, top: StreamPosition?) -> StreamReadPlan {
        guard let top else {
            return .decided(position.epoch == nil ? .emits([], top: .start) : .unavailable(.anotherEpoch))
        }
        guard position.epoch == nil || position.epoch == top.epoch else { return .decided(.unavailable(.anotherEpoch)) }
        let after = position.epoch == nil ? 0 : position.offset
        return after >= top.offset ? .decided(.emits([], top: top)) : .readAfter(after, top: top)
    }

    /// The read of the emits `found` after offset `after` up to `top`, in order: unavailable unless they begin right
    /// after it; past `byteLimit` bytes it stops (one emit at least), short of the top.
    public static func found(_ found: [StreamEmit], after: Int64, top: StreamPosition, byteLimit: Int) -> StreamRead {
        guard found.first?.position.offset == after + 1 else { return .unavailable(.noLongerHeld) }
        var bytes = 0
        var emits: [StreamEmit] = []
        for emit in found {
            bytes += emit.bytes
            if bytes > byteLimit && !emits.isEmpty { break }
            emits.append(emit)
        }
        return .emits(emits, top: top)
    }
}

/// What a stream read takes (``StreamRead/plan(after:top:)``).
public enum StreamReadPlan: Sendable, Equatable {
    /// Decided without reading an emit.
    case decided(StreamRead)
    /// The emits after this offset, up to `top`.
    case readAfter(Int64, top: StreamPosition)
}

/// What a recovering client missed of one room: its stream after the client's position, where the stream stood
/// when read, and the room's latest values.
public struct RoomCatchUp: Sendable, Equatable {
    /// The room's stream after the client's position, or why it cannot be shown.
    public var read: StreamRead
    /// Where the stream stood when it was read (``StreamPosition/start`` for a room with no stream).
    public var top: StreamPosition
    /// The room's latest values: each key's encoded packet.
    public var latest: [String: String]

    /// What a client missed of a room: the `read` of its stream, the stream's `top` and the room's `latest` values.
    public init(read: StreamRead, top: StreamPosition, latest: [String: String]) {
        self.read = read
        self.top = top
        self.latest = latest
    }
}

/// Why a stream read cannot continue from a position.
public enum StreamGap: String, Sendable, Equatable {
    case anotherEpoch = "another epoch"
    case noLongerHeld = "emits no longer held"
}
