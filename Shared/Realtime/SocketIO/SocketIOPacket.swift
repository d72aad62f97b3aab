/// A Socket.IO v5 packet type.
public enum SocketIOPacketType: UInt8, Sendable {
    case connect = 0
    case disconnect = 1
    case event = 2
    case ack = 3
    case connectError = 4
    case binaryEvent = 5
    case binaryAck = 6
}

/// One Socket.IO packet: `<type>[<attachments>-][<namespace>,][<ack id>][JSON]`.
public struct SocketIOPacket: Sendable, Equatable {
    /// The packet type; a binary event or ack announces `attachmentCount` attachments.
    public var type: SocketIOPacketType
    /// The namespace, `/` for the main one (which the packet's text leaves out).
    public var namespace: String
    /// The acknowledgement id: on an event that asks for an acknowledgement, and on the ack that answers it.
    public var ackId: Int?
    /// The JSON payload: `[name, arguments...]` of an event, the arguments of an ack, the object of a CONNECT or
    /// CONNECT_ERROR; nil when there is none (DISCONNECT, a CONNECT without `auth`).
    public var data: JSONValue?
    /// For binary packets: how many binary attachments follow.
    public var attachmentCount: Int

    /// A packet; the defaults are the main namespace, no ack id, no payload and no attachments.
    public init(
        type: SocketIOPacketType, namespace: String = "/", ackId: Int? = nil, data: JSONValue? = nil,
        attachmentCount: Int = 0
    ) {
        self.type = type
        self.namespace = namespace
        self.ackId = ackId
        self.data = data
        self.attachmentCount = attachmentCount
    }

    /// The most attachments one packet may announce.
    public static let maximumAttachments = 10

    /// The packet's text (binary attachments travel as separate Engine.IO packets).
    public var encoded: String {
        var text = String(type.rawValue)
        if type == .binaryEvent || type == .binaryAck { text += "\(attachmentCount)-" }
        if namespace != "/" { text += namespace + "," }
        if let ackId { text += String(ackId) }
        if let data { data.write(to: &text) }
        return text
    }

    /// Parses a packet, and validates a client's as the reference server does (a packet a server sent, read by a
    /// client such as the testing module's, is only parsed).
    /// - Throws: ``EngineProtocolError`` for anything malformed; the connection is then closed.
    public static func decode(_ text: String, sentByServer: Bool = false) throws(EngineProtocolError) -> SocketIOPacket
    {
        let bytes = Array(text.utf8)
        var index = 0
        guard let first = bytes.first, first >= 0x30, first <= 0x36,
            let type = SocketIOPacketType(rawValue: first - 0x30)
        else {
            throw EngineProtocolError("unknown Socket.IO packet type")
        }
        index = 1
        var attachments = 0
        if type == .binaryEvent || type == .binaryAck {
            let start = index
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
            guard index > start, index < bytes.count, bytes[index] == UInt8(ascii: "-"),
                let count = Int(String(decoding: bytes[start..<index], as: UTF8.self)), count >= 1,
                count <= maximumAttachments
            else { throw EngineProtocolError("bad attachment count") }
            attachments = count
            index += 1
        }
        var namespace = "/"
        if index < bytes.count, bytes[index] == UInt8(ascii: "/") {
            let start = index
            while index < bytes.count, bytes[index] != UInt8(ascii: ",") { index += 1 }
            namespace = String(decoding: bytes[start..<index], as: UTF8.self)
            if index < bytes.count { index += 1 }
        }
        var ackId: Int?
        let idStart = index
        while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
        if index > idStart {
            guard index - idStart <= 15, let id = Int(String(decoding: bytes[idStart..<index], as: UTF8.self)) else {
                throw EngineProtocolError("bad ack id")
            }
            ackId = id
        }
        var data: JSONValue?
        if index < bytes.count {
            do {
                data = try JSONValue.parse(Array(bytes[index...]))
            } catch {
                throw EngineProtocolError("bad packet payload: \(error)")
            }
        }
        let packet = SocketIOPacket(
            type: type, namespace: namespace, ackId: ackId, data: data, attachmentCount: attachments)
        if !sentByServer { try packet.validate() }
        return packet
    }

    private static let reservedEvents: Set<String> = [
        "connect", "connect_error", "disconnect", "disconnecting", "newListener", "removeListener",
    ]

    private func validate() throws(EngineProtocolError) {
        switch type {
        case .connect:
            if let data, !data.isObject { throw EngineProtocolError("CONNECT payload must be an object") }
        case .disconnect:
            if data != nil { throw EngineProtocolError("DISCONNECT has no payload") }
        case .event, .binaryEvent:
            guard case .array(let values) = data, let name = values.first else {
                throw EngineProtocolError("EVENT payload must be a non-empty array")
            }
            switch name {
            case .string(let event):
                if Self.reservedEvents.contains(event) { throw EngineProtocolError("reserved event name") }
            case .number:
                break
            default:
                throw EngineProtocolError("EVENT name must be a string or number")
            }
        case .ack, .binaryAck:
            guard case .array = data, ackId != nil else { throw EngineProtocolError("ACK needs an id and an array") }
        case .connectError:
            throw EngineProtocolError("clients do not send CONNECT_ERROR")
        }
    }
}
