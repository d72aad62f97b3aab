import Foundation
import NIOCore
import Synchronization

/// What a polling GET receives.
enum PollResult: Sendable {
    case packets([EnginePacket])
    /// The session does not exist (any more).
    case gone
    /// Another GET was already waiting: the session is closed.
    case duplicate
}

/// One Engine.IO session: its transport (polling, then possibly WebSocket), outgoing queue and heartbeat state.
/// Sending never blocks: packets wait in one queue, bounded in bytes, for the next poll or the WebSocket writer.
/// A peer that lets more than the limit pile up (it does not read) is disconnected rather than buffered for.
public final class EngineSession: Sendable {
    /// The session id (`sid`): 20 random URL-safe characters, given to the client in the handshake.
    public let id: String
    /// The query of the request that opened the session, without the protocol's own parameters (`EIO`,
    /// `transport`, `sid`, `t`, `j`, `b64`).
    public let query: [String: String]
    /// The headers of the request that opened the session that ``EngineConfiguration/retainedHeaders`` keeps
    /// (lower-cased names).
    public let headers: [String: String]
    /// The client's address (the peer's, or the one a trusted proxy forwarded), if known.
    public let clientAddress: String?
    /// The most bytes of packets that may wait for the peer (queued, or taken by the WebSocket writer and not
    /// yet written).
    let outboundLimit: Int

    enum Transport: Sendable {
        case polling
        /// Packets go to the WebSocket connection's writer, woken when they wait.
        case webSocket(any EngineWebSocketWriter)
    }

    enum UpgradeState: Sendable {
        case none
        case probing
        case done
    }

    /// A packet waiting for the peer; one with a key is replaced by a later packet with the same key.
    struct Outgoing: Sendable {
        var packet: EnginePacket
        var latestKey: String?
    }

    struct State: Sendable {
        var transport: Transport
        var upgrade: UpgradeState = .none
        var queue: [Outgoing] = []
        /// Bytes in `queue` plus those the WebSocket writer took and has not written yet.
        var pendingBytes = 0
        var pollWaiter: CheckedContinuation<PollResult, Never>?
        /// The WebSocket writer was woken and has not yet found the queue empty: no need to wake it again.
        var writerWoken = false
        var closeReason: EngineCloseReason?
        /// A ping is out and its pong has not come yet.
        var awaitingPong = false
        /// The next heartbeat step: the next ping, or the deadline of the pong.
        var heartbeatTimer: Scheduled<Void>?
        var connectTimer: Scheduled<Void>?
        var closeHandlers: [@Sendable () -> Void] = []
        var claimed = false
        /// The client closed the session (a close packet) while no poll was waiting: the poll it sent alongside,
        /// arriving just after, is answered with a noop once, as if it had been waiting ("forcefully closes").
        var owedCloseNoop: OwedCloseNoop?

        /// The writer to wake, unless it was woken already.
        mutating func wakeWriter(_ writer: any EngineWebSocketWriter) -> (any EngineWebSocketWriter)? {
            guard !writerWoken else { return nil }
            writerWoken = true
            return writer
        }

        /// Takes the whole queue (its bytes stay pending when `stillPending`, until the writer reports them written).
        mutating func takeQueue(stillPending: Bool) -> [EnginePacket] {
            defer {
                queue.removeAll()
                if !stillPending { pendingBytes = 0 }
            }
            return queue.map(\.packet)
        }
    }

    let state: Mutex<State>

    init(
        id: String, query: [String: String], headers: [String: String], clientAddress: String? = nil,
        transport: Transport, outboundLimit: Int
    ) {
        self.id = id
        self.query = query
        self.headers = headers
        self.clientAddress = clientAddress
        self.outboundLimit = outboundLimit
        self.state = Mutex(State(transport: transport))
    }

    /// Whether the session has ended.
    public var isClosed: Bool { state.withLock { $0.closeReason != nil } }

    /// Marks the session as taken over by the layer above (Socket.IO: a namespace was joined), which stops the
    /// connect timeout.
    public func claim() {
        let timer = state.withLock { state in
            state.claimed = true
            defer { state.connectTimer = nil }
            return state.connectTimer
        }
        timer?.cancel()
    }

    /// Runs `handler` once when the session closes (at once if it already has).
    func onClose(_ handler: @escaping @Sendable () -> Void) {
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

    /// Bytes waiting for the peer.
    var pendingBytes: Int { state.withLock { $0.pendingBytes } }

    /// Sends a message packet with `text`.
    public func send(text: String) { send([EnginePacket(.message, text)]) }

    /// Sends packets in order, together (a Socket.IO packet and its binary attachments never interleave with
    /// another). Over the outbound limit the session closes (``EngineCloseReason/outboundBacklogFull``).
    /// - Parameter latestKey: for a single packet: drops a packet with the same key that still waits for the peer
    ///   (only the latest matters, e.g. a position) instead of sending both.
    public func send(_ packets: [EnginePacket], latestKey: String? = nil) {
        let bytes = packets.reduce(0) { $0 + $1.byteCount }
        enum Outcome {
            case none
            case poll(CheckedContinuation<PollResult, Never>, [EnginePacket])
            case wake(any EngineWebSocketWriter)
            case overflow
        }
        let outcome = state.withLock { state -> Outcome in
            guard state.closeReason == nil else { return .none }
            // The newer packet goes to the end of the queue, so packets stay in the order they were emitted in
            // (their recovery offsets never go backwards).
            if let latestKey, packets.count == 1,
                let index = state.queue.firstIndex(where: { $0.latestKey == latestKey })
            {
                state.pendingBytes -= state.queue.remove(at: index).packet.byteCount
            }
            if state.pendingBytes > 0 && state.pendingBytes + bytes > outboundLimit { return .overflow }
            state.pendingBytes += bytes
            state.queue.append(contentsOf: packets.map { Outgoing(packet: $0, latestKey: latestKey) })
            switch state.transport {
            case .webSocket(let writer):
                return state.wakeWriter(writer).map { .wake($0) } ?? .none
            case .polling:
                guard state.upgrade != .probing, let waiter = state.pollWaiter else { return .none }
                state.pollWaiter = nil
                return .poll(waiter, state.takeQueue(stillPending: false))
            }
        }
        switch outcome {
        case .none: break
        case .poll(let waiter, let batch): waiter.resume(returning: .packets(batch))
        case .wake(let writer): writer.packetsWaiting()
        case .overflow:
            RealtimeMetrics.outboundOverflows.increment()
            close(.outboundBacklogFull)
        }
    }

    /// What the WebSocket writer does next: write packets (their bytes stay pending until it reports them written with
    /// ``webSocketWrote(_:)``), rest until woken again, or end the connection: the session closed and everything it
    /// queued before closing was handed out.
    func takeWebSocketBatch() -> WebSocketBatch {
        state.withLock { state in
            if !state.queue.isEmpty { return .packets(state.takeQueue(stillPending: true)) }
            state.writerWoken = false
            return state.closeReason == nil ? .idle : .finished
        }
    }

    /// The WebSocket writer wrote (or failed to write) `bytes` of the packets it took.
    func webSocketWrote(_ bytes: Int) {
        state.withLock { $0.pendingBytes = max(0, $0.pendingBytes - bytes) }
    }

    /// Waits for the packets of a polling GET: what is queued, or the next packets.
    func poll() async -> PollResult {
        await withCheckedContinuation { continuation in
            let immediate = state.withLock { state -> PollResult? in
                guard state.closeReason == nil else {
                    return state.owedCloseNoop?.claim() == true ? .packets([EnginePacket(.noop)]) : .gone
                }
                if state.pollWaiter != nil { return .duplicate }
                if state.upgrade == .probing { return .packets([EnginePacket(.noop)]) }
                if case .webSocket = state.transport { return .gone }
                if !state.queue.isEmpty { return .packets(state.takeQueue(stillPending: false)) }
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

    /// The noop owed to a poll arriving after the client's close packet (see `owedCloseNoop`), if any: the server
    /// keeps it for polls that come after the session is removed.
    var owedCloseNoop: OwedCloseNoop? { state.withLock { $0.owedCloseNoop } }

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

    /// The client sent `5`: from now on `writer` takes the packets, starting with those queued for polling.
    func completeUpgrade(writer: any EngineWebSocketWriter) {
        let woken = state.withLock { state -> (any EngineWebSocketWriter)? in
            guard state.closeReason == nil else { return nil }
            state.upgrade = .done
            state.transport = .webSocket(writer)
            return state.queue.isEmpty ? nil : state.wakeWriter(writer)
        }
        woken?.packetsWaiting()
    }

    /// The probing WebSocket went away before `5`: the session stays on polling.
    func cancelUpgrade() {
        state.withLock { state in
            if state.upgrade == .probing { state.upgrade = .none }
        }
    }

    /// Ends the session. A waiting poll is answered with `pollAnswer` (close or noop); the WebSocket writer
    /// finishes after what is queued, unless the session closes for an overflowing backlog: then the queue is
    /// dropped and the connection closed at once.
    public func close(_ reason: EngineCloseReason, pollAnswer: EnginePacket = EnginePacket(.close)) {
        struct Effects {
            var poll: CheckedContinuation<PollResult, Never>?
            var wake: (any EngineWebSocketWriter)?
            var timers: [Scheduled<Void>] = []
            var handlers: [@Sendable () -> Void] = []
            var abort: (any EngineWebSocketWriter)?
        }
        let effects = state.withLock { state -> Effects in
            guard state.closeReason == nil else { return Effects() }
            state.closeReason = reason
            var effects = Effects(
                poll: state.pollWaiter,
                timers: [state.heartbeatTimer, state.connectTimer].compactMap { $0 }, handlers: state.closeHandlers
            )
            if reason == .clientClose, state.pollWaiter == nil, case .polling = state.transport {
                state.owedCloseNoop = OwedCloseNoop()
            }
            state.closeHandlers.removeAll()
            state.pollWaiter = nil
            state.heartbeatTimer = nil
            state.connectTimer = nil
            switch state.transport {
            case .webSocket(let writer) where reason != .outboundBacklogFull:
                effects.wake = state.wakeWriter(writer)  // It writes what is queued, then ends the socket.
            case .webSocket(let writer):
                effects.abort = writer
                state.queue.removeAll()
                state.pendingBytes = 0
            case .polling:
                state.queue.removeAll()
                state.pendingBytes = 0
            }
            return effects
        }
        for timer in effects.timers { timer.cancel() }
        effects.abort?.abort()
        effects.poll?.resume(returning: .packets([pollAnswer]))
        effects.wake?.packetsWaiting()
        for handler in effects.handlers { handler() }
    }

    /// Why the session closed, once it has.
    var closeReason: EngineCloseReason? { state.withLock { $0.closeReason } }

    /// The heartbeat's event loop and timing, set before each ping goes out (see `sendPing`).
    let pongContext = Mutex<(eventLoop: any EventLoop, interval: Duration, timeout: Duration)?>(nil)
}

/// A noop owed to the one poll a client sent alongside its close packet. The poll may find the session still
/// registered or already removed; whichever path it takes claims the same token, so it is answered once.
final class OwedCloseNoop: Sendable {
    private let owed = Atomic<Bool>(true)

    /// True for the first caller only.
    func claim() -> Bool { owed.exchange(false, ordering: .acquiringAndReleasing) }
}
