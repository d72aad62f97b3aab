import Synchronization

/// Tasks waiting, each for one key, until ``resume(_:)`` wakes the key or a timeout passes: for what another task or
/// the store's notices bring (a room's feed that opens, a mark that comes back through the notices).
final class Waiters<Key: Hashable & Sendable>: Sendable {
    /// A place in the queue of a key, taken by ``register(_:)`` under the lock that guards what is waited for, so a
    /// ``resume(_:)`` right after it is not missed.
    struct Ticket: Sendable {
        fileprivate let key: Key
        fileprivate let id: Int
    }

    private enum Slot {
        case registered
        case parked(CheckedContinuation<Void, Never>)
    }

    private let state = Mutex<(next: Int, slots: [Key: [Int: Slot]])>((0, [:]))

    init() {}

    /// Takes a place in the queue of `key`; wait with ``wait(_:timeout:)``.
    func register(_ key: Key) -> Ticket {
        state.withLock { state in
            state.next += 1
            state.slots[key, default: [:]][state.next] = .registered
            return Ticket(key: key, id: state.next)
        }
    }

    /// Waits until `ticket`'s key is resumed, at most `timeout` (less if the task is cancelled). Whether it was
    /// resumed.
    func wait(_ ticket: Ticket, timeout: Duration) async -> Bool {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let parked = self.state.withLock { state -> Bool in
                        guard state.slots[ticket.key]?[ticket.id] != nil else { return false }
                        state.slots[ticket.key]?[ticket.id] = .parked(continuation)
                        return true
                    }
                    if !parked { continuation.resume() }
                }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
            // Still in the queue: the time ran out first.
            guard let slot = take(ticket) else { return true }
            if case .parked(let continuation) = slot { continuation.resume() }
            return false
        }
    }

    /// Wakes every task waiting for `key`.
    func resume(_ key: Key) {
        let slots = state.withLock { $0.slots.removeValue(forKey: key) } ?? [:]
        for case .parked(let continuation) in slots.values { continuation.resume() }
    }

    private func take(_ ticket: Ticket) -> Slot? {
        state.withLock { state in
            let slot = state.slots[ticket.key]?.removeValue(forKey: ticket.id)
            if state.slots[ticket.key]?.isEmpty == true { state.slots.removeValue(forKey: ticket.key) }
            return slot
        }
    }
}
