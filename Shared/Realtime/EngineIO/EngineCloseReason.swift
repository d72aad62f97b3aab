// Why a session ended and what the peer sent it: the two values the layer above an Engine.IO session receives.

/// Why an Engine.IO session ended.
public enum EngineCloseReason: String, Sendable {
    /// The peer asked (close packet) or its socket went away.
    case clientClose = "client close"
    case transportClose = "transport close"
    case transportError = "transport error"
    case pingTimeout = "ping timeout"
    case connectTimeout = "connect timeout"
    case protocolError = "parse error"
    case serverClose = "server close"
    case serverShutdown = "server shutting down"
    /// More bytes waited for the peer than the outbound limit allows: it does not read (fast enough).
    case outboundBacklogFull = "outbound backlog full"
    /// More packets waited to be handled than the inbound limit allows: it sends faster than they are handled.
    case inboundBacklogFull = "inbound backlog full"
}

/// A message from the peer: the payload of an Engine.IO message packet.
public enum EngineMessage: Sendable, Equatable {
    case text(String)
    case binary([UInt8])
}
