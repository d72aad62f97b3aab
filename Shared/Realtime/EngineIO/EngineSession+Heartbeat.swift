import Foundation
import NIOCore
import Synchronization

/// The heartbeat, driven by event-loop timers rather than a task per session: a ping every `interval`, counted
/// from the last pong; no pong within `timeout` closes the session.
extension EngineSession {
    /// Starts the heartbeat (and the connect timeout, if any) on `eventLoop`.
    func startHeartbeat(on eventLoop: any EventLoop, interval: Duration, timeout: Duration, connectTimeout: Duration?) {
        let connectTimer = connectTimeout.map { limit in
            eventLoop.scheduleTask(in: TimeAmount(limit)) { [weak self] in
                guard let self, !self.isClaimed else { return }
                self.close(.connectTimeout)
            }
        }
        let pingTimer = schedulePing(on: eventLoop, interval: interval, timeout: timeout)
        let closed = state.withLock { state -> Bool in
            guard state.closeReason == nil else { return true }
            state.connectTimer = connectTimer
            state.heartbeatTimer = pingTimer
            return false
        }
        if closed {
            connectTimer?.cancel()
            pingTimer.cancel()
        }
    }

    func schedulePing(on eventLoop: any EventLoop, interval: Duration, timeout: Duration) -> Scheduled<Void> {
        eventLoop.scheduleTask(in: TimeAmount(interval)) { [weak self] in
            self?.sendPing(on: eventLoop, interval: interval, timeout: timeout)
        }
    }

    func sendPing(on eventLoop: any EventLoop, interval: Duration, timeout: Duration) {
        let deadline = eventLoop.scheduleTask(in: TimeAmount(timeout)) { [weak self] in
            guard let self else { return }
            if self.state.withLock({ $0.awaitingPong }) { self.close(.pingTimeout) }
        }
        // Known before the ping goes out: a pong answered faster than this thread reaches the next line would
        // otherwise be ignored, and the session closed for a pong it got.
        pongContext.withLock { $0 = (eventLoop, interval, timeout) }
        let open = state.withLock { state -> Bool in
            guard state.closeReason == nil else { return false }
            state.awaitingPong = true
            state.heartbeatTimer = deadline
            return true
        }
        guard open else {
            deadline.cancel()
            return
        }
        send([EnginePacket(.ping)])
    }

    /// The peer answered a ping: the next one goes out `interval` from now.
    func receivedPong() {
        guard let (eventLoop, interval, timeout) = pongContext.withLock({ $0 }) else { return }
        let next = schedulePing(on: eventLoop, interval: interval, timeout: timeout)
        let previous = state.withLock { state -> Scheduled<Void>?? in
            guard state.closeReason == nil, state.awaitingPong else { return .none }
            state.awaitingPong = false
            defer { state.heartbeatTimer = next }
            return .some(state.heartbeatTimer)
        }
        switch previous {
        case .none: next.cancel()
        case .some(let timer): timer?.cancel()
        }
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
