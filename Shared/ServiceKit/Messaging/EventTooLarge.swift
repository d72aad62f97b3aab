/// An event too large to publish; the request that would have written it is refused (413 `EVENT_TOO_LARGE`).
package struct EventTooLarge: Error, CustomStringConvertible {
    package var eventType: String
    package var bytes: Int
    package var maximumBytes: Int
    package var description: String { "the \(eventType) event would be \(bytes) bytes; the limit is \(maximumBytes)" }

    package init(eventType: String, bytes: Int, maximumBytes: Int) {
        self.eventType = eventType
        self.bytes = bytes
        self.maximumBytes = maximumBytes
    }
}
