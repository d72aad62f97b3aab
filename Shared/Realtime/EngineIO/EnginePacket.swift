import Foundation

/// An Engine.IO v4 packet type, sent as its digit.
package enum EnginePacketType: UInt8, Sendable {
    case open = 0
    case close = 1
    case ping = 2
    case pong = 3
    case message = 4
    case upgrade = 5
    case noop = 6
}

/// One Engine.IO packet: a type and text, or a binary message.
package struct EnginePacket: Sendable, Equatable {
    package var type: EnginePacketType
    package var payload: Payload

    package enum Payload: Sendable, Equatable {
        case text(String)
        case binary([UInt8])
    }

    package init(_ type: EnginePacketType, _ text: String = "") {
        self.type = type
        self.payload = .text(text)
    }

    /// A binary message (sent raw over WebSocket, as `b` + base64 over polling).
    package static func binary(_ bytes: [UInt8]) -> EnginePacket {
        EnginePacket(type: .message, payload: .binary(bytes))
    }

    package init(type: EnginePacketType, payload: Payload) {
        self.type = type
        self.payload = payload
    }

    /// The size of the packet's payload in bytes (what it costs while it waits in a queue).
    var byteCount: Int {
        switch payload {
        case .text(let text): text.utf8.count + 1
        case .binary(let bytes): bytes.count
        }
    }

    /// The text of a WebSocket text frame (`4hello`), or nil for a binary message.
    package var webSocketText: String? {
        guard case .text(let text) = payload else { return nil }
        return String(type.rawValue) + text
    }

    /// The packet as it appears inside a polling payload.
    package var pollingText: String {
        switch payload {
        case .text(let text): String(type.rawValue) + text
        case .binary(let bytes): "b" + Data(bytes).base64EncodedString()
        }
    }

    /// Parses a WebSocket text frame or one packet of a polling payload.
    /// - Throws: ``EngineProtocolError`` for an empty text, an unknown type, or bad base64.
    package static func decode(text: Substring, allowBase64: Bool) throws(EngineProtocolError) -> EnginePacket {
        guard let first = text.utf8.first else { throw EngineProtocolError("empty packet") }
        if first == UInt8(ascii: "b"), allowBase64 {
            guard let data = Data(base64Encoded: String(text.dropFirst())) else {
                throw EngineProtocolError("bad base64")
            }
            return .binary(Array(data))
        }
        guard first >= UInt8(ascii: "0"), first <= UInt8(ascii: "6"), let type = EnginePacketType(rawValue: first - 48)
        else {
            throw EngineProtocolError("unknown packet type")
        }
        return EnginePacket(type, String(text.dropFirst()))
    }

    /// The packets of a polling request body, separated by the record separator (0x1E).
    package static func decodePayload(_ body: String) throws(EngineProtocolError) -> [EnginePacket] {
        var packets: [EnginePacket] = []
        for part in body.split(separator: "\u{1E}", omittingEmptySubsequences: false) {
            packets.append(try decode(text: part, allowBase64: true))
        }
        return packets
    }

    /// A polling response body: every packet, separated by the record separator.
    package static func encodePayload(_ packets: [EnginePacket]) -> String {
        packets.map(\.pollingText).joined(separator: "\u{1E}")
    }
}

/// A peer broke the Engine.IO or Socket.IO protocol; its connection is closed.
package struct EngineProtocolError: Error, CustomStringConvertible {
    package var reason: String
    package init(_ reason: String) { self.reason = reason }
    package var description: String { reason }
}
