/// A test waited longer than it allows for something: a frame, an event, a condition.
public struct TimedOut: Error, CustomStringConvertible {
    /// What was waited for, in words.
    public var what: String
    /// How long it was waited for.
    public var timeout: Duration
    /// Creates the error for `what`, waited for `timeout`.
    public init(what: String, timeout: Duration) {
        self.what = what
        self.timeout = timeout
    }
    public var description: String { "timed out after \(timeout) waiting for \(what)" }
}
