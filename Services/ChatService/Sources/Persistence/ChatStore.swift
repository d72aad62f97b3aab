import Contracts
import Foundation
import Logging
import PostgresNIO
import RealtimePlatform
import ServiceKit

// The store and the prepared statements only it runs, kept together: each statement is read with the method using it.

extension ChatRoom.Status: PostgresTextEnum {}

/// The chat schema's SQL, on the caller's connection (in its transaction when it has one; a message is sent in one
/// statement of its own); no decisions here (those are ``ChatRules`` and ``ChatWorkflow``).
package struct ChatStore: Sendable {
    let logger: Logger

    package init(logger: Logger) { self.logger = logger }

    // MARK: Rooms (the projection of orders.events)

    /// The room of a new order: waiting for a rider.
    package func openRoom(orderId: String, customerId: String, on connection: PostgresConnection) async throws {
        try await connection.queryWhileOpen(
            """
            INSERT INTO chat_rooms (order_id, customer_id, status) VALUES (\(orderId), \(customerId), 'waiting_for_rider')
            ON CONFLICT (order_id) DO NOTHING
            """, logger: logger
        )
    }

    /// Sets the room's rider (opening it unless closed); returns the rider it had before.
    package func assign(_ rider: PersonRef, orderId: String, customerId: String, on connection: PostgresConnection)
        async throws
        -> PersonRef?
    {
        try await openRoom(orderId: orderId, customerId: customerId, on: connection)
        let previous = try await room(orderId, lock: .update, on: connection)?.rider
        try await connection.queryWhileOpen(
            """
            UPDATE chat_rooms SET rider_id = \(rider.id), rider_name = \(rider.name),
                   status = CASE WHEN status = 'closed' THEN 'closed' ELSE 'open' END, updated_at = now()
            WHERE order_id = \(orderId)
            """, logger: logger
        )
        return previous
    }

    /// The room waits for a rider again (an operator took the order back to allocation); a closed room stays
    /// closed. Returns the rider it had before.
    package func unassign(orderId: String, customerId: String, on connection: PostgresConnection) async throws
        -> PersonRef?
    {
        try await openRoom(orderId: orderId, customerId: customerId, on: connection)
        let previous = try await room(orderId, lock: .update, on: connection)?.rider
        try await connection.queryWhileOpen(
            """
            UPDATE chat_rooms SET rider_id = NULL, rider_name = NULL,
                   status = CASE WHEN status = 'closed' THEN 'closed' ELSE 'waiting_for_rider' END, updated_at = now()
            WHERE order_id = \(orderId)
            """, logger: logger
        )
        return previous
    }

    /// Closes the room at `now` with a system message; nil if it was already closed (or never existed).
    package func close(
        orderId: String, customerId: String, reason: String, now: Date, on connection: PostgresConnection
    ) async throws -> ChatMessageView? {
        try await openRoom(orderId: orderId, customerId: customerId, on: connection)
        let rows = try await connection.queryWhileOpen(
            """
            UPDATE chat_rooms SET status = 'closed', closed_reason = \(reason), closed_at = \(now), updated_at = now()
            WHERE order_id = \(orderId) AND status <> 'closed' RETURNING order_id
            """, logger: logger
        )
        var closed = false
        for try await _ in rows { closed = true }
        guard closed else { return nil }
        return try await insert(
            orderId: orderId, senderId: nil, senderRole: "system", senderName: "System", text: ChatLimits.closedText,
            quickReplyId: nil, clientMessageId: nil, on: connection
        ).message
    }

    /// How a read of a room locks its row until the transaction ends.
    package enum RowLock: Sendable {
        /// No lock.
        case none
        /// Shared: the room's rider and status cannot change meanwhile (a join's access check holds it until the
        /// socket is in the room).
        case share
        /// Exclusive: for a change of the room.
        case update
    }

    package func room(_ orderId: String, lock: RowLock = .none, on connection: PostgresConnection) async throws
        -> ChatRoom?
    {
        let bindings = PostgresBindings(orderId)
        let rows =
            switch lock {
            case .none: try await connection.queryWhileOpen(ReadRoom.self, bindings, logger: logger)
            case .share: try await connection.queryWhileOpen(ReadRoomForShare.self, bindings, logger: logger)
            case .update: try await connection.queryWhileOpen(ReadRoomForUpdate.self, bindings, logger: logger)
            }
        for row in rows {
            let (orderId, customerId, riderId, riderName, status) = try row.decode(
                (String, String, String?, String?, ChatRoom.Status).self)
            return ChatRoom(
                orderId: orderId, customerId: customerId,
                rider: riderId.map { PersonRef(id: $0, name: riderName ?? "") }, status: status
            )
        }
        return nil
    }

    // MARK: Messages

    /// Stores a message; a repeated client message id returns the first message instead (`isNew` false).
    package func insert(
        orderId: String, senderId: String?, senderRole: String, senderName: String, text: String, quickReplyId: String?,
        clientMessageId: String?, on connection: PostgresConnection
    ) async throws -> (message: ChatMessageView, isNew: Bool) {
        let bindings = PostgresBindings(orderId, senderId, senderRole, senderName, text, quickReplyId, clientMessageId)
        for row in try await connection.queryWhileOpen(InsertMessage.self, bindings, logger: logger) {
            let message = try row.decode((Int64, String, String?, String, String, String, Date, String?).self)
            return (Self.view(message), true)
        }
        return (
            try await earlier(orderId: orderId, senderId: senderId, clientMessageId: clientMessageId, on: connection),
            false
        )
    }

    /// The message `senderId` sent in the room with `clientMessageId`, which a repeat found stored.
    private func earlier(
        orderId: String, senderId: String?, clientMessageId: String?, on connection: PostgresConnection
    )
        async throws -> ChatMessageView
    {
        let existing = try await connection.queryWhileOpen(
            """
            SELECT id, order_id, sender_id, sender_role, sender_name, text, sent_at, client_message_id FROM chat_messages
            WHERE order_id = \(orderId) AND sender_id = \(senderId) AND client_message_id = \(clientMessageId)
            """, logger: logger
        )
        for try await row in existing.decode((Int64, String, String?, String, String, String, Date, String?).self) {
            return Self.view(row)
        }
        throw ChatStoreInconsistency(orderId: orderId, clientMessageId: clientMessageId)
    }

    /// The room a message is sent to, the id the message will have (drawn now: its `message` emit carries it),
    /// and which of the room's parties have a socket in it seen after `presentSince` with their app in the
    /// foreground (``SocketPresence/isPresent(userId:room:now:on:)``).
    package func roomForSending(_ orderId: String, presentSince: Date, on connection: PostgresConnection) async throws
        -> (room: ChatRoom?, messageId: Int64, present: Set<String>)
    {
        for row in try await connection.queryWhileOpen(
            ReadRoomForSending.self, PostgresBindings(orderId, presentSince), logger: logger)
        {
            let (orderId, customerId, riderId, riderName, status, messageId, customerPresent, riderPresent) =
                try row.decode((String, String, String?, String?, ChatRoom.Status, Int64, Bool, Bool).self)
            let room = ChatRoom(
                orderId: orderId, customerId: customerId,
                rider: riderId.map { PersonRef(id: $0, name: riderName ?? "") }, status: status)
            var present: Set<String> = []
            if customerPresent { present.insert(customerId) }
            if riderPresent, let riderId { present.insert(riderId) }
            return (room, messageId, present)
        }
        return (nil, 0, [])
    }

    /// Stores `message`, its `message` emit and its `events` in one statement (its own transaction), unless its
    /// sender already sent its client message id in the room; returns the message stored (the earlier one then)
    /// and whether it is new.
    package func send(
        _ message: ChatMessageView, messageId: Int64, quickReplyId: String?, emits: RealtimeEmitter,
        except socketId: String?, events: [OutboxEntry], outbox: Outbox, on connection: PostgresConnection
    ) async throws -> (message: ChatMessageView, isNew: Bool) {
        var bindings = PostgresBindings(
            messageId, message.orderId, message.senderId, message.senderRole, message.senderName, message.text,
            quickReplyId, message.clientMessageId, message.sentAt)
        try emits.appendEmitArguments(
            "message", message, toRooms: [ChatRoom.socketRoom(message.orderId)], except: socketId, to: &bindings)
        outbox.appendWriteArguments(events, to: &bindings)
        if try await !connection.queryWhileOpen(SendMessage.self, bindings, logger: logger).isEmpty {
            return (message, true)
        }
        let stored = try await earlier(
            orderId: message.orderId, senderId: message.senderId, clientMessageId: message.clientMessageId,
            on: connection)
        return (stored, false)
    }

    /// Messages of a room, newest first, before `before` (a message id) when given.
    package func messages(orderId: String, before: Int64?, limit: Int, on connection: PostgresConnection) async throws
        -> [ChatMessageView]
    {
        let rows = try await connection.queryWhileOpen(
            """
            SELECT id, order_id, sender_id, sender_role, sender_name, text, sent_at, client_message_id FROM chat_messages
            WHERE order_id = \(orderId) AND id < \(before ?? Int64.max) ORDER BY id DESC LIMIT \(limit)
            """, logger: logger
        )
        var messages: [ChatMessageView] = []
        for try await row in rows.decode((Int64, String, String?, String, String, String, Date, String?).self) {
            messages.append(Self.view(row))
        }
        return messages
    }

    private static func view(_ row: (Int64, String, String?, String, String, String, Date, String?)) -> ChatMessageView
    {
        ChatMessageView(
            id: String(row.0), orderId: row.1, senderId: row.2, senderRole: row.3, senderName: row.4, text: row.5,
            sentAt: row.6,
            clientMessageId: row.7
        )
    }

    /// Deletes the messages of up to `limit` rooms closed before `cutoff` and not purged yet, and the rider's name;
    /// returns how many rooms it purged.
    package func purgeClosed(before cutoff: Date, now: Date, limit: Int, on connection: PostgresConnection)
        async throws -> Int
    {
        let rows = try await connection.queryWhileOpen(
            """
            WITH due AS (
                SELECT order_id FROM chat_rooms
                WHERE status = 'closed' AND purged_at IS NULL AND closed_at < \(cutoff)
                ORDER BY closed_at LIMIT \(limit) FOR UPDATE SKIP LOCKED
            ), deleted AS (
                DELETE FROM chat_messages WHERE order_id IN (SELECT order_id FROM due)
            )
            UPDATE chat_rooms SET purged_at = \(now), rider_name = NULL, updated_at = now()
            WHERE order_id IN (SELECT order_id FROM due) RETURNING order_id
            """, logger: logger
        )
        var purged = 0
        for try await _ in rows { purged += 1 }
        return purged
    }
}

/// A room's row by order id $1.
enum ReadRoom: PreparedStatementText {
    static let sql = """
        SELECT order_id, customer_id, rider_id, rider_name, status FROM chat_rooms WHERE order_id = $1::text
        """
}

/// ``ReadRoom`` share-locked.
enum ReadRoomForShare: PreparedStatementText {
    static let sql = ReadRoom.sql + " FOR SHARE"
}

/// ``ReadRoom`` locked for a change.
enum ReadRoomForUpdate: PreparedStatementText {
    static let sql = ReadRoom.sql + " FOR UPDATE"
}

/// Stores a message unless its sender already sent client message id $7 in the room: $1 order, $2 sender, $3
/// role, $4 name, $5 text, $6 quick reply.
enum InsertMessage: PreparedStatementText {
    static let sql = """
        INSERT INTO chat_messages (order_id, sender_id, sender_role, sender_name, text, quick_reply_id, client_message_id)
        VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text)
        ON CONFLICT (order_id, sender_id, client_message_id) WHERE client_message_id IS NOT NULL DO NOTHING
        RETURNING id, order_id, sender_id, sender_role, sender_name, text, sent_at, client_message_id
        """
}

/// Room $1 as a message is sent to it, the message's id, and whether its customer and its rider are present
/// (seen after $2).
enum ReadRoomForSending: PreparedStatementText {
    static let sql = """
        SELECT room.order_id, room.customer_id, room.rider_id, room.rider_name, room.status,
               nextval('chat_messages_id_seq'),
               \(ChatPresence.presentCondition(room: "room.order_id", user: "room.customer_id", since: "$2::timestamptz")),
               \(ChatPresence.presentCondition(room: "room.order_id", user: "room.rider_id", since: "$2::timestamptz"))
        FROM chat_rooms AS room WHERE room.order_id = $1::text
        """
}

/// Stores a message (ids and time given: $1 id, $2 order, $3 sender, $4 role, $5 name, $6 text, $7 quick reply,
/// $8 client message id, $9 sent at) with its emit ($10-$16) and its events ($17-$22), unless its sender already
/// sent client message id $8 in the room; a row when stored.
enum SendMessage: PreparedStatementText {
    static let sql = """
        WITH message AS (
            INSERT INTO chat_messages
                (id, order_id, sender_id, sender_role, sender_name, text, quick_reply_id, client_message_id, sent_at)
            VALUES ($1::bigint, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text, $9::timestamptz)
            ON CONFLICT (order_id, sender_id, client_message_id) WHERE client_message_id IS NOT NULL DO NOTHING
            RETURNING id
        )
        SELECT \(RealtimeEmitter.emitCall(numbering: .inPlace, parametersFrom: 10)),
               \(Outbox.writeCall(parametersFrom: 17))
        FROM message
        """
}
