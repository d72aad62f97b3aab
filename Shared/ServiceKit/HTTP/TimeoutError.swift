/// Thrown by ``withTimeout(_:_:)`` when the operation took too long.
package struct TimeoutError: Error, CustomStringConvertible {
    package var timeout: Duration
    package var description: String { "no answer within \(timeout)" }
}

/// Runs `operation`, cancelling it and throwing ``TimeoutError`` if it takes longer than `timeout`.
package func withTimeout<T: Sendable>(
    _ timeout: Duration, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw TimeoutError(timeout: timeout)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}
