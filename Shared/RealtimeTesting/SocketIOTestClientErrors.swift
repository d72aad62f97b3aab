// What a SocketIOTestClient call throws besides TimedOut: a refusal the test may expect, or a protocol surprise.

/// The server refused a namespace connection with CONNECT_ERROR.
public struct SocketIOConnectRefused: Error, Equatable {
    /// CONNECT_ERROR's `message`.
    public var message: String
    /// CONNECT_ERROR's `data.code`, if the server sent one.
    public var code: String?
    /// The refusal with `message` and `code`, as a test expects it.
    public init(message: String, code: String? = nil) {
        self.message = message
        self.code = code
    }
}

/// The server did something the client did not expect: a packet that does not parse, a closed connection.
public struct SocketIOTestClientError: Error, CustomStringConvertible {
    /// What happened.
    public var description: String
    init(_ description: String) { self.description = description }
}
