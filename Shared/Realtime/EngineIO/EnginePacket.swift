import Foundation

/// An Engine.IO v4 packet type, sent as its digit.
public enum EnginePacketType: UInt8, Sendable {
    case open = 0
    case close = 1
    case ping = 2
    case pong = 3
    case message = 4
    case upgrade = 5
    case noop = 6
}

/// One Engine.IO packet: a type and text, or a binary message.
public struct EnginePacket: Sendable, Equatable {
    /// The packet type; the wire form of a binary payload carries none (it is always a message).
    public var type: EnginePacketType
    /// The text after the type digit, or the bytes of a binary message.
    public var payload: Payload

    /// What a packet carries: the text after its type digit, or the raw bytes of a binary message.
    public enum Payload: Sendable, Equatable {
        case text(String)
        case binary([UInt8])
    }

    /// A text packet: `type` followed by `text` (empty for packets without data, such as a ping).
    public init(_ type: EnginePacketType, _ text: String = "") {
        self.type = type
        self.payload = .text(text)
    }

    /// A binary message (sent raw over WebSocket, as `b` + base64 over polling).
    public static func binary(_ bytes: [UInt8]) -> EnginePacket {
        EnginePacket(type: .message, payload: .binary(bytes))
    }

    /// A packet of any type and payload; ``binary(_:)`` makes a binary message.
    public init(type: EnginePacketType, payload: Payload) {
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
    public var webSocketText: String? {
        guard case .text(let text) = payload else { return nil }
        return String(type.rawValue) + text
    }

    /// The packet as it appears inside a polling payload.
    var pollingText: String {
        switch payload {
        case .text(let text): String(type.rawValue) + text
        case .binary(let bytes): "b" + Data(bytes).base64EncodedString()
        }
    }

    /// Parses a WebSocket text frame or one packet of a polling payload.
    /// - Throws: ``EngineProtocolError`` for an empty text, an unknown type, or bad base64.
    public static func decode(text: Substring, allowBase64: Bool) throws(EngineProtocolError) -> EnginePacket {
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
    public static func decodePayload(_ body: String) throws(EngineProtocolError) -> [EnginePacket] {
        var packets: [EnginePacket] = []
        for part in body.split(separator: "\u{1E}", omittingEmptySubsequences: false) {
            packets.append(try decode(text: part, allowBase64: true))
        }
        return packets
    }

    /// A polling response body: every packet, separated by the record separator.
    public static func encodePayload(_ packets: [EnginePacket]) -> String {
        packets.map(\.pollingText).joined(separator: "\u{1E}")
    }
}

/// A peer broke the Engine.IO or Socket.IO protocol; its connection is closed.
public struct EngineProtocolError: Error, CustomStringConvertible {
    /// What the peer did wrong, e.g. `unknown packet type`; also the error's description.
    public var reason: String
    /// A protocol error for `reason`; the session it is thrown for is closed.
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}
