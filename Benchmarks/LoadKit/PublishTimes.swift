import Synchronization

/// When each request (by id) was published, for timing its arrival elsewhere.
package final class PublishTimes: Sendable {
    private let times = Mutex<[String: ContinuousClock.Instant]>([:])

    package init() {}

    package subscript(id: String) -> ContinuousClock.Instant? {
        get { times.withLock { $0[id] } }
        set { times.withLock { $0[id] = newValue } }
    }
}
