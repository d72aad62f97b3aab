import Foundation
import NIOCore
import NIOPosix

/// Socket.IO settings of a server.
public struct SocketIOConfiguration: Sendable {
    /// The per-socket limit on incoming events of every namespace that sets none of its own.
    public var rateLimit = SocketIORateLimit(eventsPerSecond: 20, burst: 50)
    /// The most bytes of packets that may wait to be handled per connection (each packet counts its size plus
    /// 64); a connection that sends faster than its packets are handled is closed.
    public var inboundBacklogLimit = 1 << 20
    /// Where per-socket deadlines (a token's expiry) are scheduled; tests pass an event loop whose time they
    /// advance.
    public var timers: any EventLoop = MultiThreadedEventLoopGroup.singleton.any()
    /// Connection state recovery (Socket.IO v4.6): nil turns it off (no `pid`, no offsets on events).
    public var recovery: SocketIORecoverySettings?
    /// The clock recovery's window is measured with.
    public var now: @Sendable () -> Date = { Date() }
    /// How typed handlers decode payloads and typed emits and acknowledgements encode values.
    public var coding = JSONCoding.standard
    /// The answer to an acknowledged event whose handler threw: nil for an error the client is not told about
    /// (logged and answered `INTERNAL_ERROR`). An application maps its own error types here, falling back to
    /// ``describeProtocolError(_:)``.
    public var describeError: @Sendable (any Error) -> SocketIOEventError? = describeProtocolError

    /// The defaults: 20 events per second with bursts of 50, a 1 MiB inbound backlog, no recovery, and
    /// ``JSONCoding/standard``.
    public init() {}

    /// The answers of this library's own errors: a ``SocketIOEventError`` as it is, a ``SocketIOPayloadError`` as
    /// `VALIDATION_FAILED`.
    public static func describeProtocolError(_ error: any Error) -> SocketIOEventError? {
        switch error {
        case let error as SocketIOEventError: error
        case let error as SocketIOPayloadError:
            SocketIOEventError(
                code: .validationFailed,
                message: "the \(error.event) payload does not have the expected shape: \(error.underlying)")
        default: nil
        }
    }
}

/// A per-socket limit on incoming events: a token bucket of `burst` events refilled at `eventsPerSecond`.
public struct SocketIORateLimit: Sendable {
    /// How many events per second refill the bucket (fractions allowed, e.g. 0.5 for one every two seconds).
    public var eventsPerSecond: Double
    /// The bucket's size: how many events a socket may send at once after it was quiet.
    public var burst: Int
    /// A limit of `burst` events at once, refilled at `eventsPerSecond`.
    public init(eventsPerSecond: Double, burst: Int) {
        self.eventsPerSecond = eventsPerSecond
        self.burst = burst
    }
}
