import Foundation

/// An emit to one room of a namespace, as a server hands it to its store.
public struct RoomEmit: Sendable, Equatable {
    /// The namespace's name, e.g. `/chat`.
    public var namespace: String
    /// The room whose sockets get it, e.g. a ``SocketIONamespace/userRoom(_:)``.
    public var room: String
    /// The Socket.IO event packet, encoded, without a recovery offset.
    public var packet: String
    /// The binary attachments the packet's placeholders refer to, sent after it as binary messages.
    public var attachments: [[UInt8]]
    /// The socket that does not get it (the sender's own).
    public var except: String?
    /// Set when only the latest emit of this key in the room matters (a position, an ETA): it replaces the room's
    /// previous value of the key instead of joining the room's stream, carries no offset, and a recovered socket
    /// gets the latest value again.
    public var latestKey: String?

    /// An emit of the encoded `packet` (``SocketIONamespace/eventPacket(_:_:)`` makes one) to `room`; by default
    /// without attachments, to every socket in the room, and into the room's stream.
    public init(
        namespace: String, room: String, packet: String, attachments: [[UInt8]] = [], except: String? = nil,
        latestKey: String? = nil
    ) {
        self.namespace = namespace
        self.room = room
        self.packet = packet
        self.attachments = attachments
        self.except = except
        self.latestKey = latestKey
    }
}

/// An emit of a room's stream, with its place in it.
public struct StreamEmit: Sendable, Equatable {
    /// The namespace's name, e.g. `/chat`.
    public var namespace: String
    /// The room whose stream it is in.
    public var room: String
    /// The stream's epoch and this emit's offset in it.
    public var position: StreamPosition
    /// The encoded event packet as appended; with recovery on, each delivery adds the receiving socket's recovery
    /// offset as its last argument.
    public var packet: String
    /// The binary attachments the packet's placeholders refer to, sent after it as binary messages.
    public var attachments: [[UInt8]]
    /// The id of the socket that does not get it (the sender's), or nil when every socket in the room does.
    public var except: String?

    /// An emit at `position` of its room's stream, as a store makes it when it appends (and hands it back on reads).
    public init(
        namespace: String, room: String, position: StreamPosition, packet: String, attachments: [[UInt8]] = [],
        except: String? = nil
    ) {
        self.namespace = namespace
        self.room = room
        self.position = position
        self.packet = packet
        self.attachments = attachments
        self.except = except
    }

    /// What the packets cost to hold and send, in bytes.
    public var bytes: Int { packet.utf8.count + attachments.reduce(0) { $0 + $1.count } }
}

/// What a store tells every server as it commits.
public enum RealtimeNotice: Sendable, Equatable {
    /// An emit joined its room's stream. Without its packet when that was too large to come along
    /// (``RealtimeStore/emits(namespace:room:after:byteLimit:)`` reads it).
    case emit(namespace: String, room: String, position: StreamPosition, packet: StreamEmit?)
    /// A room's latest value of a key changed.
    case latest(namespace: String, room: String, key: String, packet: String)
    /// A session was restored by `owner` (another server's socket of it must go).
    case sessionClaimed(pid: String, generation: Int, owner: String)
    /// A server's mark (``RealtimeStore/mark(_:)``): every notice of a change committed before it was sent came
    /// first.
    case mark(String)
    /// The sockets in room `socketsIn` leave `room` (a user who lost access to it): in commit order with the emits,
    /// so none of `room`'s emits committed after reaches them.
    case leave(namespace: String, socketsIn: String, room: String)
}
