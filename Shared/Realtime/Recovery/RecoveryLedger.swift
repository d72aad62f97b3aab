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

    package init() {}

    /// How long emits are kept: the window plus the time a packet may have been in flight when the connection
    /// dropped.
    var retention: TimeInterval { windowSeconds + 60 }

    var windowSeconds: TimeInterval {
        let (seconds, attoseconds) = window.components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
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
        let text = withOffset ? Self.appendingOffset(offset, to: broadcast.packet) : broadcast.packet
        let packets =
            [EnginePacket(.message, text)]
            + broadcast.attachments.compactMap { Data(base64Encoded: $0).map { EnginePacket.binary(Array($0)) } }
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
        _ session: RecoverableSession, namespace: String, origin: String, at: Date, offset: Int64
    )
        -> Bool
    {
        advance(to: offset)
        let current = sessions[session.pid]
        // A record from an instance that no longer holds the session (its socket there dropped after the client
        // reconnected elsewhere) changes nothing.
        if let current, current.owner != origin, session.state != .connected { return false }
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
    /// connected). Nil when the session is unknown, is another user's or namespace's, dropped longer ago than the
    /// window, or some emit it may have missed is no longer held.
    package func restoration(pid: String, namespace: String, userId: String?, offset: Int64?, now: Date) -> Restoration?
    {
        guard let session = sessions[pid], session.namespace == namespace, session.record.userId == userId else {
            return nil
        }
        let record = session.record
        if record.state == .disconnected,
            now.timeIntervalSince(session.at) > settings.windowSeconds
        {
            return nil
        }
        let from = max(offset ?? record.since, record.since)
        guard from <= head, let start else { return nil }
        // Held from just after `from`; or, for a session that had received everything sent to it, from just after
        // it dropped (an idle client's last offset may be older than anything held).
        let complete =
            start <= from + 1
            || (record.state == .disconnected && (record.lastSent ?? record.since) <= from
                && start <= (record.disconnectedAt ?? head) + 1)
        guard complete else { return nil }
        let rooms = Set(record.rooms)
        let missed = entries.lazy.filter { entry in
            entry.offset > from && !entry.superseded && entry.namespace == namespace
                && !entry.except.contains(record.sid) && entry.rooms.contains(where: rooms.contains)
        }
        return Restoration(session: record, missed: Array(missed))
    }

    /// Records that `pid` now lives on `owner` (restored there), before its own record comes back.
    mutating func restored(_ session: RecoverableSession, namespace: String, owner: String, at: Date) {
        sessions[session.pid] = Session(record: session, namespace: namespace, owner: owner, at: at)
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
        guard let first = entries.first, offset >= first.offset else { return nil }
        // Offsets increase but may skip (records that are not emits), so search back from the end.
        var index = entries.index(before: entries.endIndex)
        while true {
            if entries[index].offset == offset { return index }
            if entries[index].offset < offset || index == entries.startIndex { return nil }
            index = entries.index(before: index)
        }
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
            let keep = sessions.sorted { $0.value.at > $1.value.at }.prefix(settings.sessionLimit)
            sessions = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
        }
    }
}
