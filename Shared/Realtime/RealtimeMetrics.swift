import Metrics

/// Counters shared by every Socket.IO server in the process (the connected-socket gauges are per namespace).
enum RealtimeMetrics {
    static let packetsIn = Counter(label: "socketio_packets_in_total")
    static let packetsOut = Counter(label: "socketio_packets_out_total")
    static let ackTimeouts = Counter(label: "socketio_ack_timeouts_total")
    static let rateLimited = Counter(label: "socketio_rate_limited_total")
    /// Connections closed because more than the outbound limit waited for a peer that does not read.
    static let outboundOverflows = Counter(
        label: "socketio_backlog_overflows_total", dimensions: [("direction", "outbound")])
    /// Connections closed because more packets waited to be handled than the inbound limit allows.
    static let inboundOverflows = Counter(
        label: "socketio_backlog_overflows_total", dimensions: [("direction", "inbound")])
    /// Handshakes refused because their client address held the most sessions it may.
    static let sessionsRefused = Counter(label: "socketio_sessions_refused_total")
    /// Sockets disconnected because their access token expired.
    static let tokenExpiries = Counter(label: "socketio_token_expiries_total")
    /// Sockets restored by connection state recovery.
    static let recoveries = Counter(label: "socketio_recoveries_total")
    /// Emits of rooms' streams sent to sockets.
    static let emitsDelivered = Counter(label: "socketio_emits_delivered_total")
    /// Reconnects with a `pid` that were not recovered, by reason.
    static func recoveryRefused(_ refusal: RecoveryRefusal) {
        Counter(label: "socketio_recoveries_refused_total", dimensions: [("reason", refusal.rawValue)]).increment()
    }
}
