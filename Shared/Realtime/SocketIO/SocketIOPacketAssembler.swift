/// Turns a connection's Engine.IO messages into complete Socket.IO packets: a binary packet is held until all the
/// attachments it announced have arrived.
public struct SocketIOPacketAssembler: Sendable {
    /// A binary packet waiting for its attachments.
    private var partial: (packet: SocketIOPacket, attachments: [[UInt8]])?

    /// An assembler with no packet waiting; keep one per connection, since attachments follow their packet.
    public init() {}

    /// The packet that `message` completes, if any.
    /// - Throws: ``EngineProtocolError`` for a malformed packet, text while attachments are due, or an attachment
    ///   that no packet announced.
    public mutating func receive(
        _ message: EngineMessage
    ) throws(EngineProtocolError) -> (packet: SocketIOPacket, attachments: [[UInt8]])? {
        switch message {
        case .text(let text):
            guard partial == nil else { throw EngineProtocolError("text while attachments are expected") }
            let packet = try SocketIOPacket.decode(text)
            guard packet.attachmentCount > 0 else { return (packet, []) }
            partial = (packet, [])
            return nil
        case .binary(let bytes):
            guard var pending = partial else { throw EngineProtocolError("unexpected binary attachment") }
            pending.attachments.append(bytes)
            guard pending.attachments.count == pending.packet.attachmentCount else {
                partial = pending
                return nil
            }
            partial = nil
            return pending
        }
    }
}
