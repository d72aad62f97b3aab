import Metrics

/// Counters shared by every Socket.IO server in the process (the connected-socket gauges are per namespace).
enum RealtimeMetrics {
    static let packetsIn = Counter(label: "socketio_packets_in_total")
    static let packetsOut = Counter(label: "socketio_packets_out_total")
    static let ackTimeouts = Counter(label: "socketio_ack_timeouts_total")
    static let rateLimited = Counter(label: "socketio_rate_limited_total")
}
