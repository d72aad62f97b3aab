import Foundation
import NIOCore

/// How long and how much a server keeps for connection state recovery.
package struct SocketIORecoverySettings: Sendable {
    /// How long after its connection dropped a client may still recover (Socket.IO's `maxDisconnectionDuration`).
    package var window: Duration = .seconds(120)
    /// The most bytes of emits kept for recovery; beyond it the oldest go first (clients that missed them are not
    /// recovered and reload their state).
    package var bufferLimit = 64 << 20
    /// The most sessions remembered; beyond it the longest-unchanged are forgotten.
    package var sessionLimit = 500_000
    /// The most bytes of missed emits a restore sends; a client that missed more connects afresh (more would
    /// overflow its outbound queue, ``EngineConfiguration/outboundBacklogLimit``, and close it again).
    package var replayLimit = 768 << 10
    /// How long a client recovering a session this instance holds waits for an offset it has not applied yet (it
    /// reads the log a little behind the instance the client came from).
    package var catchUpWait: Duration = .seconds(2)

    package init() {}

    /// How long emits are kept: the window plus the time a packet may have been in flight when the connection
    /// dropped.
    var retention: TimeInterval { windowSeconds + 60 }

    var windowSeconds: TimeInterval {
        let (seconds, attoseconds) = window.components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}

/// Why a session was not restored (the client then connects afresh).
package enum RecoveryRefusal: String, Error, Sendable {
    /// No such session in this namespace (never seen, ended, or forgotten).
    case unknownSession = "unknown session"
    case anotherUser = "another user"
    /// It dropped longer ago than the window.
    case windowPassed = "window passed"
    /// The client names an offset the log has not reached.
    case offsetAhead = "offset ahead of the log"
    /// An emit it may have missed is no longer held.
    case emitsNoLongerHeld = "missed emits no longer held"
    /// It missed more than a restore sends (``SocketIORecoverySettings/replayLimit``).
    case tooMuchMissed = "too much missed"
}

/// What a server keeps of the realtime log to restore sockets: every emit of the last few minutes (only the latest
/// of each `latestKey`), the sessions of sockets that may come back, and the keys of deduplicated emits. Pure
/// state; the server applies records to it in log order.
package struct RecoveryLedger {
    package struct Entry {
        package var offset: Int64
        var at: Date
        var namespace: String
        var rooms: [String]
        var except: [String]
        /// The packets as sent: the event packet carries the offset as its last argument.
        package var packets: [EnginePacket]
        var latestKey: String?
        var bytes: Int
        var superseded = false
    }

    struct Session {
        var record: RecoverableSession
        var namespace: String
        /// The instance holding it (for connected sessions).
        var owner: String
        /// When its last record was written.
        var at: Date
    }

    /// The missed emits of a session being restored, and the session as it was.
    package struct Restoration {
        package var session: RecoverableSession
        package var missed: [Entry]
    }

    let settings: SocketIORecoverySettings
    /// The offset of the last applied record (-1 before any).
    package private(set) var head: Int64 = -1
    /// Every emit at or after this offset is held (or was superseded by a later one with its key).
    private(set) var start: Int64?
    private var entries = CircularBuffer<Entry>()
    private var bytes = 0
    private var latestOffsets: [String: Int64] = [:]
    private var dedupeKeys: [String: Date] = [:]
    private(set) var sessions: [String: Session] = [:]
    private var lastPruned = Date.distantPast

    package init(settings: SocketIORecoverySettings) {
        self.settings = settings
    }

    /// Applies an emit at `offset`: returns its packets as sent (with the offset appended when `withOffset`), or
    /// nil for a duplicate of an emit already applied.
    package mutating func apply(
        _ broadcast: RealtimeBroadcast, namespace: String, at: Date, offset: Int64, withOffset: Bool, now: Date
    ) -> [EnginePacket]? {
        advance(to: offset)
        defer { evict(now: now) }
        if let key = broadcast.dedupeKey {
            guard dedupeKeys[key] == nil else { return nil }
            dedupeKeys[key] = at
        }
        let packets = Self.packets(
            withOffset ? Self.appendingOffset(offset, to: broadcast.packet) : broadcast.packet,
            attachments: broadcast.attachments)
        guard withOffset else { return packets }
        let cost = packets.reduce(0) { $0 + $1.byteCount } + broadcast.rooms.reduce(64) { $0 + $1.utf8.count }
        if let key = broadcast.latestKey {
            if let previous = latestOffsets[key], let index = index(of: previous) {
                bytes -= entries[index].bytes
                entries[index].superseded = true
                entries[index].packets = []
                entries[index].bytes = 0
            }
            latestOffsets[key] = offset
        }
        entries.append(
            Entry(
                offset: offset, at: at, namespace: namespace, rooms: broadcast.rooms, except: broadcast.except,
                packets: packets, latestKey: broadcast.latestKey, bytes: cost))
        bytes += cost
        return packets
    }

    /// Applies a session record at `offset`. Returns true when it moves a session connected to `local` to another
    /// instance (the client reconnected there): the local socket must go.
    package mutating func apply(
        _ session: RecoverableSession, namespace: String, origin: String, at: Date, offset: Int64, now: Date
    )
        -> Bool
    {
        advance(to: offset)
        defer { evict(now: now) }
        let current = sessions[session.pid]
        // Each restore starts a generation: a record of an older one (the instance the client left, noticing its
        // socket drop late), or of the same one from another instance, changes nothing.
        if let current,
            session.generation < current.record.generation
                || (session.generation == current.record.generation && current.owner != origin)
        {
            return false
        }
        let movedAway = current.map { $0.owner != origin && $0.record.state == .connected } ?? false
        switch session.state {
        case .ended:
            sessions.removeValue(forKey: session.pid)
        case .connected, .disconnected:
            sessions[session.pid] = Session(record: session, namespace: namespace, owner: origin, at: at)
        }
        return movedAway
    }

    /// Applies a record that carries neither an emit nor a session (an instance's start marker).
    mutating func skip(_ offset: Int64) { advance(to: offset) }

    /// Restores session `pid` for `userId` in `namespace`, whose client last received `offset` (nil: none since it
    /// connected), or says why it cannot be.
    /// Whether `pid` names a session of `userId` in `namespace` that this ledger holds: the cheap check before a
    /// recovering client is made to wait for its offset.
    package func holdsSession(pid: String, namespace: String, userId: String?) -> Bool {
        guard let session = sessions[pid] else { return false }
        return session.namespace == namespace && session.record.userId == userId
    }

    package func restoration(pid: String, namespace: String, userId: String?, offset: Int64?, now: Date)
        -> Result<Restoration, RecoveryRefusal>
    {
        guard let session = sessions[pid], session.namespace == namespace else { return .failure(.unknownSession) }
        guard session.record.userId == userId else { return .failure(.anotherUser) }
        let record = session.record
        if record.state == .disconnected, now.timeIntervalSince(session.at) > settings.windowSeconds {
            return .failure(.windowPassed)
        }
        let from = max(offset ?? record.since, record.since)
        guard from <= head, let start else { return .failure(.offsetAhead) }
        // Held from just after `from`; or, for a session that had received everything sent to it, from just after
        // it dropped (an idle client's last offset may be older than anything held).
        let complete =
            start <= from + 1
            || (record.state == .disconnected && (record.lastSent ?? record.since) <= from
                && start <= (record.disconnectedAt ?? head) + 1)
        guard complete else { return .failure(.emitsNoLongerHeld) }
        let rooms = Set(record.rooms)
        var missed: [Entry] = []
        var bytes = 0
        var index = firstIndex(after: from)
        while index < entries.endIndex {
            let entry = entries[index]
            index = entries.index(after: index)
            guard
                !entry.superseded && entry.namespace == namespace && !entry.except.contains(record.sid)
                    && entry.rooms.contains(where: rooms.contains)
            else { continue }
            bytes += entry.bytes
            // More than the client's outbound queue takes would close the connection again, and again.
            guard bytes <= settings.replayLimit else { return .failure(.tooMuchMissed) }
            missed.append(entry)
        }
        return .success(Restoration(session: record, missed: missed))
    }

    /// Records that `pid` now lives on `owner` (restored there), before its own record comes back.
    mutating func restored(_ session: RecoverableSession, namespace: String, owner: String, at: Date) {
        sessions[session.pid] = Session(record: session, namespace: namespace, owner: owner, at: at)
    }

    /// An emit's Engine.IO packets: the Socket.IO packet, then its attachments (base64 in the log).
    static func packets(_ text: String, attachments: [String]) -> [EnginePacket] {
        [EnginePacket(.message, text)]
            + attachments.compactMap { Data(base64Encoded: $0).map { EnginePacket.binary(Array($0)) } }
    }

    /// The event packet `text` (`2/nsp,["event",...]`) with the offset as its last argument, as Socket.IO sends it.
    static func appendingOffset(_ offset: Int64, to text: String) -> String {
        guard text.hasSuffix("]") else { return text }
        return text.dropLast() + ",\"\(offset)\"]"
    }

    // MARK: Private

    private mutating func advance(to offset: Int64) {
        head = max(head, offset)
        if start == nil { start = offset }
    }

    private func index(of offset: Int64) -> CircularBuffer<Entry>.Index? {
        let index = firstIndex(after: offset - 1)
        return index < entries.endIndex && entries[index].offset == offset ? index : nil
    }

    /// The first entry after `offset` (offsets increase, with gaps where records are not emits): a binary search.
    private func firstIndex(after offset: Int64) -> CircularBuffer<Entry>.Index {
        var low = 0
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if entries[entries.index(entries.startIndex, offsetBy: middle)].offset <= offset {
                low = middle + 1
            } else {
                high = middle
            }
        }
        return entries.index(entries.startIndex, offsetBy: low)
    }

    private mutating func evict(now: Date) {
        let oldest = now.addingTimeInterval(-settings.retention)
        while let first = entries.first, first.at < oldest || bytes > settings.bufferLimit {
            entries.removeFirst()
            bytes -= first.bytes
            start = first.offset + 1
            if let key = first.latestKey, latestOffsets[key] == first.offset { latestOffsets.removeValue(forKey: key) }
        }
        guard now.timeIntervalSince(lastPruned) >= 10 || sessions.count > settings.sessionLimit else { return }
        lastPruned = now
        dedupeKeys = dedupeKeys.filter { $0.value >= oldest }
        let window = settings.windowSeconds
        sessions = sessions.filter { _, session in
            // A connected session's instance may have died without saying so: forget it after a day.
            now.timeIntervalSince(session.at) <= (session.record.state == .connected ? 86_400 : window)
        }
        if sessions.count > settings.sessionLimit {
            let keep = sessions.sorted { $0.value.at > $1.value.at }.prefix(settings.sessionLimit * 9 / 10)
            sessions = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
        }
    }
}
