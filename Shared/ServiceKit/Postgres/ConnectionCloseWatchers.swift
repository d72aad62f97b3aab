import PostgresNIO
import Synchronization

/// Wakes the statements waiting on a connection when it closes. One close callback per connection: NIO cannot remove
/// a callback, and one per statement would pile up on a pooled connection that lives for hours.
final class ConnectionCloseWatchers: Sendable {
    static let shared = ConnectionCloseWatchers()
    /// How long after the close an answer may still complete a wait: a statement's answer resumes a task before it
    /// completes the promise, while the close completes it at once, so an answer just before a close would lose.
    static let grace: TimeAmount = .milliseconds(100)

    private struct State {
        /// The waits of each open connection that was ever watched (an empty entry: watched, nobody waiting).
        var waiters: [ObjectIdentifier: [Int: @Sendable () -> Void]] = [:]
        var next = 0
    }
    private let state = Mutex(State())

    /// Watches `connection` for a wait, ended by `closed` when the connection closes (at once if it has).
    func watch(_ connection: PostgresConnection, _ closed: @escaping @Sendable () -> Void) -> Int {
        let key = ObjectIdentifier(connection)
        let (id, isFirst) = state.withLock { state -> (Int, Bool) in
            defer { state.next += 1 }
            let isFirst = state.waiters[key] == nil
            state.waiters[key, default: [:]][state.next] = closed
            return (state.next, isFirst)
        }
        if isFirst {
            let eventLoop = connection.eventLoop
            connection.closeFuture.whenComplete { _ in self.closed(key, eventLoop: eventLoop) }
        }
        return id
    }

    func unwatch(_ connection: PostgresConnection, _ id: Int) {
        _ = state.withLock { $0.waiters[ObjectIdentifier(connection)]?.removeValue(forKey: id) }
    }

    private func closed(_ key: ObjectIdentifier, eventLoop: any EventLoop) {
        let waiters = state.withLock { $0.waiters.removeValue(forKey: key) } ?? [:]
        guard !waiters.isEmpty else { return }
        eventLoop.scheduleTask(in: Self.grace) { for closed in waiters.values { closed() } }
    }
}
