// The WebSocket side of a session: the writer it wakes and what the writer takes next.

/// The writer of a session on WebSocket: the connection's handler, which takes the packets on its event loop.
protocol EngineWebSocketWriter: AnyObject, Sendable {
    /// Packets wait, or the session closed: take them with ``EngineSession/takeWebSocketBatch()`` until it says
    /// idle or finished. Called from any thread, once until the writer finds the queue empty.
    func packetsWaiting()
    /// The session closed for an overflowing backlog: the connection closes at once, without what is queued.
    func abort()
}

/// What the WebSocket writer of a session does next (``EngineSession/takeWebSocketBatch()``).
enum WebSocketBatch {
    case packets([EnginePacket])
    /// Nothing waits: rest until woken.
    case idle
    /// The session closed and everything was handed out: end the connection.
    case finished
}
