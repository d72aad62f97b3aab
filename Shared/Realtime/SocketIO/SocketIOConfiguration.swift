import Foundation
import NIOCore
import NIOPosix

/// Socket.IO settings of a server.
package struct SocketIOConfiguration: Sendable {
    /// The per-socket limit on incoming events of every namespace that sets none of its own.
    package var rateLimit = SocketIORateLimit(eventsPerSecond: 20, burst: 50)
    /// The most bytes of packets that may wait to be handled per connection (each packet counts its size plus
    /// 64); a connection that sends faster than its packets are handled is closed.
    package var inboundBacklogLimit = 1 << 20
    /// Where per-socket deadlines (a token's expiry) are scheduled; tests pass an event loop whose time they
    /// advance.
    package var timers: any EventLoop = MultiThreadedEventLoopGroup.singleton.any()
    /// Connection state recovery (Socket.IO v4.6): nil turns it off (no `pid`, no offsets on events).
    package var recovery: SocketIORecoverySettings?
    /// The clock recovery's window is measured with.
    package var now: @Sendable () -> Date = { Date() }

    package init() {}
}

/// A per-socket limit on incoming events: a token bucket of `burst` events refilled at `eventsPerSecond`.
package struct SocketIORateLimit: Sendable {
    package var eventsPerSecond: Double
    package var burst: Int
    package init(eventsPerSecond: Double, burst: Int) {
        self.eventsPerSecond = eventsPerSecond
        self.burst = burst
    }
}
