/// How one server follows one room's stream, as a state machine that returns what to do (no I/O, no clock): it
/// opens by asking the store where the stream stands while keeping the room's notices, then delivers each next
/// emit in order; a notice that skips ahead, or one that came without its packet, makes it read the gap from the
/// store before it goes on.
///
/// Every emit committed after the feed began opening is delivered: notices that arrive while it opens are kept, and
/// the first of them may come from just before the store was asked. The server gives ``opened(at:)`` the store's
/// answer only once every notice up to that answer has come (``RealtimeStore/mark(_:)``). A leave (``leave(_:)``)
/// takes its sockets out of the room in the same order: after the emits told before it.
struct RoomFeed: Sendable {
    /// A notice of the room's stream: the emit's position, and the emit unless it came without its packet.
    struct Notice: Sendable, Equatable {
        /// The emit's place in the room's stream.
        var position: StreamPosition
        /// The emit, or nil when the notice came without its packet (too large); the feed then reads it from the store.
        var emit: StreamEmit?

        /// A notice of the emit at `position`; `emit` is nil when the notice came without its packet.
        init(position: StreamPosition, emit: StreamEmit?) {
            self.position = position
            self.emit = emit
        }
    }

    /// What the server does next, in order.
    enum Step: Sendable, Equatable {
        /// Ask the store where the stream stands (``opened(at:)`` takes the answer).
        case readPosition
        /// Read the stream after a position from the store (``filled(_:)`` takes the answer).
        case readEmits(after: StreamPosition)
        /// Sockets that joined while the feed opened are in the room from this position.
        case started(StreamPosition)
        /// Deliver these emits to the room's sockets, in order.
        case deliver([StreamEmit])
        /// Take these sockets (by id) out of this room: a change that committed after the emits delivered before
        /// this step, and before those delivered after it, said so.
        case leave(Set<String>)
        /// The store cannot show what the room's sockets missed: they must reload (their connections are closed,
        /// and their recovery is refused). The feed opens again.
        case lost(StreamGap)
    }

    /// Opening (waiting for the stream's position), live (delivering notices as they come), or filling (reading a gap
    /// from the store while keeping notices).
    enum State: Sendable, Equatable {
        case opening
        case live
        case filling
    }

    /// Where the feed is: it delivers a notice at once only while live.
    private(set) var state: State = .opening
    /// The position of the last emit delivered (once opened).
    private(set) var position: StreamPosition = .start
    /// Notices kept while opening or filling, oldest first.
    private var kept: [Notice] = []
    /// Notices may have been missed (the store's following was lost): read again once the current read is done.
    private var stale = false
    /// Leaves told while emits told before them were not delivered yet, oldest first.
    private var leaves: [PendingLeave] = []

    /// A leave waiting for the emits told before it: those up to `after` (nil: none that is not delivered yet).
    private struct PendingLeave: Sendable {
        var after: StreamPosition?
        /// The sockets it takes out, by id: those in the room when it was told, less any that joined it again since.
        var sockets: Set<String>

        /// Whether the leave goes before the emit at `next`: it committed before that emit.
        func goesBefore(_ next: StreamPosition) -> Bool {
            guard let after else { return true }
            return next.epoch != after.epoch || next.offset > after.offset
        }
    }

    /// A new feed: the server asks the store for the stream's position (``Step/readPosition``).
    init() {}

    /// A notice for the room.
    mutating func received(_ notice: Notice) -> [Step] {
        guard state == .live else {
            kept.append(notice)
            return []
        }
        return advance(with: [notice])
    }

    /// A change committed that takes `sockets` (ids of sockets in the room) out of the room, told in order with the
    /// room's notices: they get every emit told before it and none after it. While the feed opens or reads a gap it
    /// waits for the emits told before it; while it reads a gap with none kept, it goes before whatever the read
    /// brings.
    mutating func leave(_ sockets: Set<String>) -> [Step] {
        guard !sockets.isEmpty else { return [] }
        guard state != .live || !kept.isEmpty || !leaves.isEmpty else { return [.leave(sockets)] }
        let after = kept.last?.position ?? (state == .opening ? nil : position)
        leaves.append(PendingLeave(after: after, sockets: sockets))
        return []
    }

    /// Socket `id` joined the room again after the leaves told so far (its join was decided after their changes
    /// committed): none of them takes it out.
    mutating func rejoined(_ id: String) {
        guard !leaves.isEmpty else { return }
        for index in leaves.indices { leaves[index].sockets.remove(id) }
        leaves.removeAll { $0.sockets.isEmpty }
    }

    /// The store's answer to ``Step/readPosition``: the stream stood at `top`.
    mutating func opened(at top: StreamPosition) -> [Step] {
        guard state == .opening else { return [] }
        state = .live
        // Sockets that joined meanwhile start before the first kept notice, if it follows on from `top`; otherwise
        // at `top`, and a kept notice further on is a gap.
        if let first = kept.first, first.position.offset > 0,
            first.position.epoch == top.epoch
                ? first.position.offset <= top.offset + 1 : follows(first.position, after: top)
        {
            position = StreamPosition(epoch: first.position.epoch, offset: first.position.offset - 1)
        } else {
            position = top
        }
        let notices = kept
        kept = []
        return [.started(position)] + advance(with: notices)
    }

    /// The store's answer to ``Step/readEmits(after:)``.
    mutating func filled(_ read: StreamRead) -> [Step] {
        guard state == .filling else { return [] }
        switch read {
        case .unavailable(let gap):
            state = .opening
            position = .start
            stale = false
            return [.lost(gap)] + releasingLeaves() + [.readPosition]
        case .emits(let emits, let top):
            state = .live
            var delivered: [StreamEmit] = []
            for emit in emits where follows(emit.position, after: position) {
                delivered.append(emit)
                position = emit.position
            }
            let notices = kept
            kept = []
            var steps = delivering(delivered)
            if top.offset > position.offset && top.epoch == position.epoch {
                // The read stopped at its byte limit: read on.
                state = .filling
                kept = notices
                return steps + [.readEmits(after: position)]
            }
            steps += advance(with: notices)
            return steps
        }
    }

    /// Notices may have been missed (the store's following was lost and is back): a live feed whose stream moved
    /// past it (`top`, when the server knows it) reads what it missed; an opening or filling one reads again once it
    /// is live.
    mutating func resync(top: StreamPosition?) -> [Step] {
        switch state {
        case .live:
            if let top, top == position { return [] }
            state = .filling
            return [.readEmits(after: position)]
        case .opening, .filling:
            stale = true
            return []
        }
    }

    // MARK: Private

    /// Delivers the notices that follow on, in order; at the first gap (or a notice without its packet) it reads
    /// from the store, keeping the rest.
    private mutating func advance(with notices: [Notice]) -> [Step] {
        var delivered: [StreamEmit] = []
        var index = notices.startIndex
        while index < notices.endIndex {
            let notice = notices[index]
            if notice.position.epoch == position.epoch && notice.position.offset <= position.offset {
                index += 1
                continue
            }
            guard follows(notice.position, after: position), let emit = notice.emit else { break }
            delivered.append(emit)
            position = notice.position
            index += 1
        }
        var steps = delivering(delivered)
        if index < notices.endIndex || stale {
            stale = false
            state = .filling
            kept = Array(notices[index...])
            steps.append(.readEmits(after: position))
        } else {
            steps += releasingLeaves()
        }
        return steps
    }

    /// Steps that deliver `emits` in order, each waiting leave going before the first emit committed after it.
    private mutating func delivering(_ emits: [StreamEmit]) -> [Step] {
        var steps: [Step] = []
        var batch: [StreamEmit] = []
        for emit in emits {
            while let leave = leaves.first, leave.goesBefore(emit.position) {
                if !batch.isEmpty { steps.append(.deliver(batch)) }
                batch = []
                steps.append(.leave(leave.sockets))
                leaves.removeFirst()
            }
            batch.append(emit)
        }
        if !batch.isEmpty { steps.append(.deliver(batch)) }
        return steps
    }

    /// Every waiting leave, once the feed delivered all that was told before them (or its sockets must reload).
    private mutating func releasingLeaves() -> [Step] {
        defer { leaves = [] }
        return leaves.map { .leave($0.sockets) }
    }

    /// Whether an emit at `next` is the one after `position`: the next offset of the same epoch, or the first emit
    /// of a stream begun since (a room that had no stream, or a store that began it again).
    private func follows(_ next: StreamPosition, after position: StreamPosition) -> Bool {
        if next.epoch == position.epoch { return next.offset == position.offset + 1 }
        return next.offset == 1
    }
}
