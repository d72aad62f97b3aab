import Synchronization

/// A count that many tasks bump and read.
package final class LoadCounter: Sendable {
    private let count = Atomic<Int>(0)

    package init() {}

    package var value: Int { count.load(ordering: .relaxed) }

    package func increment() { count.add(1, ordering: .relaxed) }

    /// Adds one and returns the count before it: a ticket, so that tasks sharing a list each take the next item.
    package func take() -> Int { count.add(1, ordering: .relaxed).oldValue }

    /// Adds `amount`.
    package func add(_ amount: Int) { count.add(amount, ordering: .relaxed) }
}
