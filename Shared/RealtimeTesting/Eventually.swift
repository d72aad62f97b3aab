/// Waits until `condition` holds, checking every `interval`; fails with ``TimedOut`` naming `message` after
/// `timeout`.
public func eventually(
    timeout: Duration = .seconds(15), interval: Duration = .milliseconds(50),
    _ message: @autoclosure () -> String = "condition",
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await condition() { return }
        guard ContinuousClock.now < deadline else { throw TimedOut(what: message(), timeout: timeout) }
        try await Task.sleep(for: interval)
    }
}
