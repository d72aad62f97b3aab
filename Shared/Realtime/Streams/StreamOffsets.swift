/// The recovery offset a socket holds: its position in each of its rooms' streams, as of the last recoverable emit
/// it received. socket.io-client keeps the last string argument of every event and sends it back as `auth.offset`
/// when it reconnects, so each recoverable emit carries this socket's offsets as its last argument, written
/// `<room hash>:<epoch>:<offset>` per room, `~` between rooms (rooms by a 32-bit hash of their name, to keep it
/// short; a restore maps them back through the session's rooms).
struct StreamOffsets: Sendable, Equatable {
    /// Each room's position, by the room's hash.
    private(set) var positions: [UInt32: StreamPosition] = [:]

    /// The most rooms an offset names, and its longest text: anything larger is not an offset of this server.
    static let maximumRooms = 64
    static let maximumLength = 2048

    /// An offset that names no room (a socket that has received no recoverable emit yet).
    init() {}

    /// The room's hash: FNV-1a over its UTF-8.
    static func hash(_ room: String) -> UInt32 {
        room.utf8.reduce(UInt32(0x811c_9dc5)) { ($0 ^ UInt32($1)) &* 0x0100_0193 }
    }

    /// The position of `room`, if this offset names it.
    func position(of room: String) -> StreamPosition? { positions[Self.hash(room)] }

    /// Sets the position of `room` (a room with no stream yet is left out).
    mutating func set(_ position: StreamPosition, of room: String) {
        guard position.epoch != nil else { return }
        positions[Self.hash(room)] = position
    }

    /// Drops `room`'s position (the socket left the room).
    mutating func remove(_ room: String) { positions.removeValue(forKey: Self.hash(room)) }

    /// The text sent to the client.
    var encoded: String {
        var text = ""
        for (hash, position) in positions.sorted(by: { $0.key < $1.key }) {
            if !text.isEmpty { text += "~" }
            text += Self.hex(hash) + ":" + (position.epoch ?? "") + ":" + String(position.offset)
        }
        return text
    }

    /// Reads an offset a client sent back; nil for anything this server did not write.
    init?(parsing text: String) {
        guard text.utf8.count <= Self.maximumLength else { return nil }
        guard !text.isEmpty else { return }
        let entries = text.split(separator: "~", omittingEmptySubsequences: false)
        guard entries.count <= Self.maximumRooms else { return nil }
        for entry in entries {
            let fields = entry.split(separator: ":", omittingEmptySubsequences: false)
            guard fields.count == 3, fields[0].utf8.count == 8, let hash = UInt32(fields[0], radix: 16),
                (1...16).contains(fields[1].utf8.count), fields[1].utf8.allSatisfy(Self.isEpochCharacter),
                (1...18).contains(fields[2].utf8.count), fields[2].utf8.allSatisfy({ (48...57).contains($0) }),
                let offset = Int64(fields[2]), positions[hash] == nil
            else { return nil }
            positions[hash] = StreamPosition(epoch: String(fields[1]), offset: offset)
        }
    }

    private static func isEpochCharacter(_ byte: UInt8) -> Bool {
        (48...57).contains(byte) || (97...122).contains(byte)
    }

    private static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }
}
