/// A Socket.IO v5 packet type.
package enum SocketIOPacketType: UInt8, Sendable {
    case connect = 0
    case disconnect = 1
    case event = 2
    case ack = 3
    case connectError = 4
    case binaryEvent = 5
    case binaryAck = 6
}

/// One Socket.IO packet: `<type>[<attachments>-][<namespace>,][<ack id>][JSON]`.
package struct SocketIOPacket: Sendable, Equatable {
    package var type: SocketIOPacketType
    package var namespace: String
    package var ackId: Int?
    package var data: JSONValue?
    /// For binary packets: how many binary attachments follow.
    package var attachmentCount: Int

    package init(
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
    package static let maximumAttachments = 10

    /// The packet's text (binary attachments travel as separate Engine.IO packets).
    package var encoded: String {
        var text = String(type.rawValue)
        if type == .binaryEvent || type == .binaryAck { text += "\(attachmentCount)-" }
        if namespace != "/" { text += namespace + "," }
        if let ackId { text += String(ackId) }
        if let data { data.write(to: &text) }
        return text
    }

    /// Parses and validates a packet as the reference server does.
    /// - Throws: ``EngineProtocolError`` for anything malformed; the connection is then closed.
    package static func decode(_ text: String) throws(EngineProtocolError) -> SocketIOPacket {
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
        try packet.validate()
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
