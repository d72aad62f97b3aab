import Contracts
import Foundation
import OrderService
import Realtime
import ServiceKit

/// One parser under fuzzing: bytes in, and either nothing (accepted or refused cleanly) or a ``FuzzFailure`` when an
/// invariant breaks. A trap inside a parser is a failure too: the process dies.
enum FuzzTarget: String, CaseIterable, Sendable {
    /// An Engine.IO polling request body and the same bytes as a WebSocket text frame.
    case enginePacket = "engine-packet"
    /// The query string of an Engine.IO request.
    case engineQuery = "engine-query"
    /// A polling body of Engine.IO messages fed to the Socket.IO packet assembler (binary attachments included).
    case socketIOPacket = "socketio-packet"
    /// JSON text: parse, serialize, parse again; both parses and both serializations must agree.
    case json
    /// The order service's create-order body through the HTTP JSON decoder and the route's field checks.
    case httpJSON = "http-json"
    /// A list's paging parameters as a client sends them: the orders' `after` cursor and a `limit`. A cursor that
    /// parses is in range (Postgres answered 500 to one that was not) and round-trips; a limit is in range or 4xx.
    case paging

    /// The largest page size any list accepts.
    static let largestPage = 1000

    /// Runs one input.
    func run(_ bytes: [UInt8]) throws(FuzzFailure) {
        switch self {
        case .enginePacket: try Self.enginePacket(bytes)
        case .engineQuery: Self.engineQuery(bytes)
        case .socketIOPacket: try Self.socketIOPacket(bytes)
        case .json: try Self.json(bytes)
        case .httpJSON: try Self.httpJSON(bytes)
        case .paging: try Self.paging(bytes)
        }
    }

    private static func enginePacket(_ bytes: [UInt8]) throws(FuzzFailure) {
        // The server reads a polling body as `String(buffer:)`: invalid UTF-8 becomes U+FFFD the same way.
        let text = String(decoding: bytes, as: UTF8.self)
        if let packets = try? EnginePacket.decodePayload(text) {
            let encoded = EnginePacket.encodePayload(packets)
            guard let again = try? EnginePacket.decodePayload(encoded) else {
                throw FuzzFailure("a re-encoded polling payload does not decode: \(encoded.debugDescription)")
            }
            guard again == packets else { throw FuzzFailure("a polling payload changed through encode and decode") }
        }
        if let packet = try? EnginePacket.decode(text: text[...], allowBase64: false) {
            guard let frame = packet.webSocketText,
                let again = try? EnginePacket.decode(text: frame[...], allowBase64: false), again == packet
            else { throw FuzzFailure("a WebSocket text frame changed through encode and decode") }
        }
    }

    private static func engineQuery(_ bytes: [UInt8]) {
        _ = EngineServer.query(of: String(decoding: bytes, as: UTF8.self))
    }

    private static func socketIOPacket(_ bytes: [UInt8]) throws(FuzzFailure) {
        guard let packets = try? EnginePacket.decodePayload(String(decoding: bytes, as: UTF8.self)) else { return }
        var assembler = SocketIOPacketAssembler()
        for packet in packets where packet.type == .message {
            let message: EngineMessage =
                switch packet.payload {
                case .text(let text): .text(text)
                case .binary(let bytes): .binary(bytes)
                }
            // A protocol error closes the connection: the rest of the body is never read.
            let completed: (packet: SocketIOPacket, attachments: [[UInt8]])?
            do {
                completed = try assembler.receive(message)
            } catch {
                return
            }
            guard let complete = completed else { continue }
            guard complete.attachments.count == complete.packet.attachmentCount else {
                throw FuzzFailure(
                    "a packet announced \(complete.packet.attachmentCount) attachments but came with "
                        + "\(complete.attachments.count)")
            }
            let encoded = complete.packet.encoded
            guard let again = try? SocketIOPacket.decode(encoded), again == complete.packet else {
                throw FuzzFailure("a Socket.IO packet changed through encode and decode: \(encoded.debugDescription)")
            }
        }
    }

    private static func json(_ bytes: [UInt8]) throws(FuzzFailure) {
        guard let value = try? JSONValue.parse(bytes) else { return }
        let text = value.serialized
        let again: JSONValue
        do {
            again = try JSONValue.parse(text)
        } catch {
            throw FuzzFailure("serialized JSON does not parse (\(error)): \(text.debugDescription)")
        }
        guard again == value else {
            throw FuzzFailure("JSON changed through serialize and parse: \(text.debugDescription)")
        }
        guard again.serialized == text else { throw FuzzFailure("JSON serializes differently the second time") }
    }

    private static func httpJSON(_ bytes: [UInt8]) throws(FuzzFailure) {
        do throws(APIError) {
            let input = try ContractRequestDecoder.decode(OrderRoutes.CreateOrder.self, from: Data(bytes))
            _ = try Validate.address(input.deliveryAddress, "deliveryAddress")
            try Validate.amount(input.totalAmount, "totalAmount", maximum: 10_000_000)
            _ = try Validate.identifier(input.vendorId, "vendorId")
        } catch {
            guard (400..<500).contains(error.status.code) else {
                throw FuzzFailure("a request body was answered with \(error.status.code): \(error.message)")
            }
            guard (try? ContractCoding.encode(error.body)) != nil else {
                throw FuzzFailure("the error body does not encode: \(error.message.debugDescription)")
            }
        }
    }
}

extension FuzzTarget {
    fileprivate static func paging(_ bytes: [UInt8]) throws(FuzzFailure) {
        let text = String(decoding: bytes, as: UTF8.self)
        if let cursor = OrderPageCursor(text: text) {
            guard OrderPageCursor.plausibleMicros.contains(cursor.createdMicros) else {
                throw FuzzFailure("a cursor out of range parsed: \(text.debugDescription)")
            }
            guard OrderPageCursor(text: cursor.text) == cursor else {
                throw FuzzFailure("a cursor changed through its text: \(text.debugDescription)")
            }
        }
        let limit: Int
        do throws(APIError) {
            limit = try Validate.pageLimit(text, default: 20, maximum: largestPage)
        } catch {
            guard (400..<500).contains(error.status.code) else {
                throw FuzzFailure("a limit was answered with \(error.status.code): \(error.message)")
            }
            return
        }
        guard (1...largestPage).contains(limit) else { throw FuzzFailure("a limit of \(limit) was taken") }
    }
}

/// A broken invariant of a fuzz target.
struct FuzzFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
