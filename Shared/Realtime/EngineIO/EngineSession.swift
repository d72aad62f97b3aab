import Foundation
import NIOCore
import Synchronization

/// Why an Engine.IO session ended.
package enum EngineCloseReason: String, Sendable {
    /// The peer asked (close packet) or its socket went away.
    case clientClose = "client close"
    case transportClose = "transport close"
    case transportError = "transport error"
    case pingTimeout = "ping timeout"
    case connectTimeout = "connect timeout"
    case protocolError = "parse error"
    case serverClose = "server close"
    case serverShutdown = "server shutting down"
}

/// A message from the peer: the payload of an Engine.IO message packet.
package enum EngineMessage: Sendable, Equatable {
    case text(String)
    case binary([UInt8])
}

/// What a polling GET receives.
enum PollResult: Sendable {
    case packets([EnginePacket])
    /// The session does not exist (any more).
    case gone
    /// Another GET was already waiting: the session is closed.
    case duplicate
}

/// One Engine.IO session: its transport (polling, then possibly WebSocket), outgoing queue and heartbeat state.
/// Sending never blocks: packets are queued for the next poll or handed to the WebSocket writer.
package final class EngineSession: Sendable {
    package let id: String
    /// The query of the request that opened the session.
    package let query: [String: String]
    /// The headers of the request that opened the session (lower-cased names).
    package let headers: [String: String]

    enum Transport: Sendable {
        case polling
        case webSocket(AsyncStream<EnginePacket>.Continuation)
    }

    enum UpgradeState: Sendable {
        case none
        case probing
        case done
    }

    struct State: Sendable {
        var transport: Transport
        var upgrade: UpgradeState = .none
        var queue: [EnginePacket] = []
        var pollWaiter: CheckedContinuation<PollResult, Never>?
        var closeReason: EngineCloseReason?
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
        /// A ping is out and its pong has not come yet.
        var awaitingPong = false
        /// The next heartbeat step: the next ping, or the deadline of the pong.
        var heartbeatTimer: Scheduled<Void>?
        var connectTimer: Scheduled<Void>?
        var closeHandlers: [@Sendable () -> Void] = []
        var claimed = false
    }

    private let state: Mutex<State>

    init(
        id: String, query: [String: String], headers: [String: String],
        webSocket: AsyncStream<EnginePacket>.Continuation?
    ) {
        self.id = id
        self.query = query
        self.headers = headers
        self.state = Mutex(State(transport: webSocket.map { .webSocket($0) } ?? .polling))
    }

    /// Whether the session has ended.
    package var isClosed: Bool { state.withLock { $0.closeReason != nil } }

    /// Marks the session as taken over by the layer above (Socket.IO: a namespace was joined), which stops the
    /// connect timeout.
    package func claim() {
        let timer = state.withLock { state in
            state.claimed = true
            defer { state.connectTimer = nil }
            return state.connectTimer
        }
        timer?.cancel()
    }

    /// Runs `handler` once when the session closes (at once if it already has).
    package func onClose(_ handler: @escaping @Sendable () -> Void) {
        let closed = state.withLock { state -> Bool in
            guard state.closeReason == nil else { return true }
            state.closeHandlers.append(handler)
            return false
        }
        if closed { handler() }
    }

    var isClaimed: Bool { state.withLock { $0.claimed } }

    var isWebSocket: Bool {
        state.withLock { if case .webSocket = $0.transport { true } else { false } }
    }

    var upgradeState: UpgradeState { state.withLock { $0.upgrade } }

    /// Sends a message packet with `text`.
    package func send(text: String) { send([EnginePacket(.message, text)]) }

    /// Sends packets in order, together (a Socket.IO packet and its binary attachments never interleave with
    /// another).
    package func send(_ packets: [EnginePacket]) {
        let waiter = state.withLock { state -> (CheckedContinuation<PollResult, Never>, [EnginePacket])? in
            guard state.closeReason == nil else { return nil }
            switch state.transport {
            case .webSocket(let writer):
                for packet in packets { writer.yield(packet) }
                return nil
            case .polling:
                state.queue.append(contentsOf: packets)
                guard state.upgrade != .probing, let waiter = state.pollWaiter else { return nil }
                state.pollWaiter = nil
                defer { state.queue.removeAll() }
                return (waiter, state.queue)
            }
        }
        if let (waiter, batch) = waiter { waiter.resume(returning: .packets(batch)) }
    }

    /// Waits for the packets of a polling GET: what is queued, or the next packets.
    func poll() async -> PollResult {
        await withCheckedContinuation { continuation in
            let immediate = state.withLock { state -> PollResult? in
                guard state.closeReason == nil else { return .gone }
                if state.pollWaiter != nil { return .duplicate }
                if state.upgrade == .probing { return .packets([EnginePacket(.noop)]) }
                if case .webSocket = state.transport { return .gone }
                if !state.queue.isEmpty {
                    defer { state.queue.removeAll() }
                    return .packets(state.queue)
                }
                state.pollWaiter = continuation
                return nil
            }
            if let immediate {
                if case .duplicate = immediate {
                    // Two GETs at once break the protocol: the waiting one gets a close packet.
                    close(.protocolError, pollAnswer: EnginePacket(.close))
                }
                continuation.resume(returning: immediate)
            }
        }
    }

    /// A WebSocket began probing (`2probe`): a waiting poll is answered with a noop so the client can switch.
    func beginUpgrade() -> Bool {
        let waiter = state.withLock { state -> CheckedContinuation<PollResult, Never>?? in
            guard state.closeReason == nil, state.upgrade == .none, case .polling = state.transport else {
                return .none
            }
            state.upgrade = .probing
            defer { state.pollWaiter = nil }
            return .some(state.pollWaiter)
        }
        guard case .some(let pending) = waiter else { return false }
        pending?.resume(returning: .packets([EnginePacket(.noop)]))
        return true
    }

    /// The client sent `5`: from now on packets go to `writer`; what was queued for polling is flushed to it.
    func completeUpgrade(writer: AsyncStream<EnginePacket>.Continuation) {
        state.withLock { state in
            guard state.closeReason == nil else { return }
            state.upgrade = .done
            state.transport = .webSocket(writer)
            for packet in state.queue { writer.yield(packet) }
            state.queue.removeAll()
        }
    }

    /// The probing WebSocket went away before `5`: the session stays on polling.
    func cancelUpgrade() {
        state.withLock { state in
            if state.upgrade == .probing { state.upgrade = .none }
        }
    }

    /// Ends the session. A waiting poll is answered with `pollAnswer` (close or noop); the WebSocket writer
    /// finishes after what is queued.
    package func close(_ reason: EngineCloseReason, pollAnswer: EnginePacket = EnginePacket(.close)) {
        let (waiters, poll, timers, handlers) = state.withLock {
            state -> (
                [CheckedContinuation<Void, Never>], CheckedContinuation<PollResult, Never>?, [Scheduled<Void>],
                [@Sendable () -> Void]
            ) in
            guard state.closeReason == nil else { return ([], nil, [], []) }
            state.closeReason = reason
            if case .webSocket(let writer) = state.transport { writer.finish() }
            defer {
                state.closeWaiters.removeAll()
                state.closeHandlers.removeAll()
                state.pollWaiter = nil
                state.heartbeatTimer = nil
                state.connectTimer = nil
                state.queue.removeAll()
            }
            return (
                state.closeWaiters, state.pollWaiter, [state.heartbeatTimer, state.connectTimer].compactMap { $0 },
                state.closeHandlers
            )
        }
        for timer in timers { timer.cancel() }
        poll?.resume(returning: .packets([pollAnswer]))
        for handler in handlers { handler() }
        for waiter in waiters { waiter.resume() }
    }

    /// Why the session closed, once it has.
    package var closeReason: EngineCloseReason? { state.withLock { $0.closeReason } }

    /// Returns when the session has closed.
    package func waitUntilClosed() async {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state -> Bool in
                guard state.closeReason == nil else { return true }
                state.closeWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    // MARK: Heartbeat
    //
    // Driven by event-loop timers rather than a task per session: a ping every `interval`, counted from the last
    // pong; no pong within `timeout` closes the session.

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

    private func schedulePing(on eventLoop: any EventLoop, interval: Duration, timeout: Duration) -> Scheduled<Void> {
        eventLoop.scheduleTask(in: TimeAmount(interval)) { [weak self] in
            self?.sendPing(on: eventLoop, interval: interval, timeout: timeout)
        }
    }

    private func sendPing(on eventLoop: any EventLoop, interval: Duration, timeout: Duration) {
        let deadline = eventLoop.scheduleTask(in: TimeAmount(timeout)) { [weak self] in
            guard let self else { return }
            if self.state.withLock({ $0.awaitingPong }) { self.close(.pingTimeout) }
        }
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
        pongContext.withLock { $0 = (eventLoop, interval, timeout) }
    }

    private let pongContext = Mutex<(eventLoop: any EventLoop, interval: Duration, timeout: Duration)?>(nil)

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
