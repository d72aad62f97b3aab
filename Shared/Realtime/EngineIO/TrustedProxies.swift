import NIOCore

/// The proxies (such as the gateway) whose `X-Forwarded-For` or `X-Real-IP` header names the client; for any
/// other peer the connection's own address is the client's. Entries are IP addresses or IPv4 CIDR ranges.
public struct TrustedProxies: Sendable, Equatable {
    private var addresses: Set<String>
    private var ranges: [IPv4Range]

    /// `127.0.0.1` and `::1`: a gateway on the same host.
    public static let loopback = try! TrustedProxies(["127.0.0.1", "::1"])

    /// - Throws: ``InvalidEntry`` naming an entry that is neither an address nor `a.b.c.d/n`.
    public init(_ entries: [String]) throws(InvalidEntry) {
        addresses = []
        ranges = []
        for entry in entries {
            if entry.contains("/") {
                guard let range = IPv4Range(entry) else { throw InvalidEntry(entry: entry) }
                ranges.append(range)
            } else {
                guard let address = try? SocketAddress(ipAddress: entry, port: 0), let ip = address.ipAddress else {
                    throw InvalidEntry(entry: entry)
                }
                addresses.insert(Self.normalized(ip))
            }
        }
    }

    /// An entry that is not an IP address or an IPv4 range.
    public struct InvalidEntry: Error, Equatable {
        /// The rejected entry, as given.
        public var entry: String
        /// An error naming the rejected `entry`.
        public init(entry: String) { self.entry = entry }
    }

    /// Whether `address` (an IP address) is a trusted proxy.
    public func contains(_ address: String) -> Bool {
        let address = Self.normalized(address)
        if addresses.contains(address) { return true }
        guard let value = IPv4Range.parse(address) else { return false }
        return ranges.contains { $0.contains(value) }
    }

    /// The client's address: the peer's, or, when the peer is a trusted proxy, the right-most address of
    /// `X-Forwarded-For` that is not a trusted proxy (the one the outermost trusted proxy saw; those to its left
    /// are the client's to invent), else `X-Real-IP`. Nil when the peer is unknown (not a socket).
    /// - Parameter headers: lower-cased names.
    public func clientAddress(peer: SocketAddress?, headers: [String: String]) -> String? {
        guard let peerIP = peer?.ipAddress.map(Self.normalized) else { return nil }
        guard contains(peerIP) else { return peerIP }
        if let forwarded = headers["x-forwarded-for"] {
            let hops = forwarded.split(separator: ",").map { Self.normalized($0.trimmingCharacters(in: .whitespaces)) }
            if let client = hops.last(where: { !$0.isEmpty && !contains($0) }) { return client }
        }
        if let real = headers["x-real-ip"]?.trimmingCharacters(in: .whitespaces), !real.isEmpty {
            return Self.normalized(real)
        }
        return peerIP
    }

    /// An IPv4-mapped IPv6 address as its IPv4 form.
    private static func normalized(_ address: String) -> String {
        address.hasPrefix("::ffff:") && address.contains(".") ? String(address.dropFirst(7)) : address
    }
}

/// An IPv4 CIDR range, `10.0.0.0/8`.
struct IPv4Range: Sendable, Equatable {
    var network: UInt32
    var mask: UInt32

    init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let base = Self.parse(String(parts[0])), let bits = Int(parts[1]),
            (0...32).contains(bits)
        else { return nil }
        mask = bits == 0 ? 0 : UInt32.max << (32 - bits)
        network = base & mask
    }

    func contains(_ address: UInt32) -> Bool { address & mask == network }

    /// A dotted-quad IPv4 address as a number.
    static func parse(_ text: String) -> UInt32? {
        let octets = text.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4 else { return nil }
        var value: UInt32 = 0
        for octet in octets {
            guard octet.count <= 3, let byte = UInt8(octet) else { return nil }
            value = value << 8 | UInt32(byte)
        }
        return value
    }
}
