import Synchronization

/// A queue one task reads with a timeout while others push: how tests collect frames and events.
public final class AsyncQueue<Element: Sendable>: Sendable {
    private struct State {
        var items: [Element] = []
        var waiter: CheckedContinuation<Element?, Never>?
        var finished = false
    }

    private let state = Mutex(State())

    /// An empty queue.
    public init() {}

    /// Hands `item` to the waiting reader, or queues it; dropped once the queue finished.
    public func push(_ item: Element) {
        let waiter = state.withLock { state -> CheckedContinuation<Element?, Never>? in
            guard !state.finished else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.items.append(item)
            return nil
        }
        waiter?.resume(returning: item)
    }

    /// No more items will come; a waiting or later ``next(timeout:)`` gets nil once the queue is empty.
    public func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<Element?, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// The next item, nil if the queue finished.
    /// - Throws: ``TimedOut`` if nothing came within `timeout`.
    public func next(timeout: Duration = .seconds(5)) async throws -> Element? {
        let outcome: Element?? = await withTaskGroup(of: Element??.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let ready = self.state.withLock { state -> (Element?)? in
                        if !state.items.isEmpty { return .some(state.items.removeFirst()) }
                        if state.finished { return .some(nil) }
                        state.waiter = continuation
                        return nil
                    }
                    if let ready { continuation.resume(returning: ready) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return .none
            }
            let first = await group.next()!
            // Release a waiter still registered so its child ends.
            let waiter = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
            group.cancelAll()
            return first
        }
        guard let outcome else { throw TimedOut(what: "the next item", timeout: timeout) }
        return outcome
    }
}
