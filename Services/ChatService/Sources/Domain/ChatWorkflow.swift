import Contracts
import Foundation
import Logging
import PostgresNIO
import RealtimePlatform
import ServiceKit

/// Chat's transactions: joining, sending (the message, its emit, its event and the push to an absent recipient in
/// one statement), reading history, and the rooms' projection of orders.events; decided by ``ChatRules``, stored
/// through ``ChatStore``.
package struct ChatWorkflow: Sendable {
    let database: Database
    let store: ChatStore
    /// Who has a socket in which room (`chat_presence`): a message's push goes to a recipient without one.
    let presence: SocketPresence
    let outbox: Outbox
    /// The `/chat` emits, written in the transactions that cause them.
    let emits: RealtimeEmitter
    let settings: ChatSettings
    let now: Now
    let logger: Logger

    package init(
        database: Database, store: ChatStore, outbox: Outbox, emits: RealtimeEmitter, settings: ChatSettings, now: Now,
        logger: Logger
    ) {
        self.database = database
        self.store = store
        self.emits = emits
        self.presence = SocketPresence(ChatPresence.self, freshness: settings.presenceFreshness, logger: logger)
        self.outbox = outbox
        self.settings = settings
        self.now = now
        self.logger = logger
    }

    /// What a joining socket gets: its access, the rider, and the last messages (oldest first).
    package struct Joined: Sendable {
        package var access: ChatAccess
        package var rider: PersonRef?
        package var history: [ChatMessageView]
    }

    /// Lets socket `socketId` of `identity` into the room of `orderId` and records its presence.
    ///
    /// `admit` puts the socket in the room while the room's row is share-locked, before the transaction commits. A
    /// change of the room's rider waits for that lock, so either it commits after the socket is in the room (and
    /// its leave notice and the ``ChatAccessRevoked`` it writes find the socket there) or it committed first and
    /// the join is refused. `admit` first waits for the notices of the changes committed before (a rider moved away
    /// and back: the late notice of the move away must not take the new socket out).
    /// The socket is in the room before the history is read: a message committed meanwhile is in the history or
    /// delivered live (perhaps both; apps keep one per id), never neither.
    package func join(
        orderId: String, identity: Identity, socketId: String, instanceId: String,
        admit: @Sendable () async throws -> Void = {}
    ) async throws -> Joined {
        try await database.transaction { connection in
            let room = try await store.room(orderId, lock: .share, on: connection)
            let access = try ChatRules.requireJoin(room, by: identity)
            try await admit()
            let history = try await store.messages(
                orderId: orderId, before: nil, limit: ChatLimits.joinHistory, on: connection)
            try await presence.enter(
                socketId: socketId, room: orderId, userId: identity.userId, instanceId: instanceId, now: now(),
                on: connection)
            return Joined(access: access, rider: room?.rider, history: history.reversed())
        }
    }

    /// Whether a socket of `identity` may be in the room of `orderId` as last committed (one read, no lock: for a
    /// first look, which ``rejoin(orderId:identity:socketId:instanceId:)`` confirms under the lock).
    package func mayStay(orderId: String, identity: Identity) async throws -> Bool {
        try await database.withConnection { connection in
            ChatRules.mayStay(
                in: try await store.room(orderId, on: connection), userId: identity.userId, role: identity.role)
        }
    }

    /// A recovered socket of `identity`, back in the room of `orderId`: whether it may stay (under the room's row
    /// lock, as a join decides), and if so `admit` runs under that lock (as in a join) and its presence is recorded
    /// again.
    package func rejoin(
        orderId: String, identity: Identity, socketId: String, instanceId: String,
        admit: @Sendable () async throws -> Void = {}
    ) async throws -> Bool {
        try await database.transaction { connection in
            let room = try await store.room(orderId, lock: .share, on: connection)
            guard ChatRules.mayStay(in: room, userId: identity.userId, role: identity.role) else { return false }
            try await admit()
            try await presence.enter(
                socketId: socketId, room: orderId, userId: identity.userId, instanceId: instanceId, now: now(),
                on: connection)
            return true
        }
    }

    /// Runs `decide` with the room of `orderId` as last committed (nil if there is none), its row share-locked
    /// until `decide` has returned: a change of the room's rider cannot commit in between, so what `decide` does
    /// about a user's sockets holds for the access it read.
    package func withRoomLocked<Decision: Sendable>(
        _ orderId: String, _ decide: @Sendable (ChatRoom?) async throws -> Decision
    ) async throws -> Decision {
        try await database.transaction { connection in
            try await decide(try await store.room(orderId, lock: .share, on: connection))
        }
    }

    /// Stores a message of `identity` (once per client message id), with its `message` emit to the room (but the
    /// sending socket), its `ChatMessageSent` and, as `CHAT_PUSH_POLICY` says (by default when the recipient has no
    /// foreground socket in the room), a push, all in one statement (`SendMessage`). `isNew` is false for a repeat.
    package func send(
        orderId: String, identity: Identity, clientMessageId: String, text: String, quickReplyId: String?,
        fromSocket socketId: String? = nil
    ) async throws -> (message: ChatMessageView, isNew: Bool) {
        // One read (the room, the message's id, who is present), then one statement that stores the message with
        // its emit and its events: two round trips where a transaction took seven (`Benchmarks/chat.sh`,
        // docs/benchmarks.md). Read in a read committed transaction, the room was no more consistent than this. The
        // read changes nothing (a drawn id is only skipped): on a pooled connection Postgres closed, it runs again.
        let sentAt = now()
        return try await database.withConnection { connection in
            try await store.roomForSending(orderId, presentSince: sentAt - presence.freshness, on: connection)
        } then: { connection, read in
            let (room, messageId, present) = read
            try ChatRules.requireSend(room, by: identity)
            let senderName = ChatRules.senderName(of: identity, in: room)
            let message = ChatMessageView(
                id: String(messageId), orderId: orderId, senderId: identity.userId,
                senderRole: identity.role.rawValue, senderName: senderName, text: text,
                sentAt: Date(timeIntervalSince1970: (sentAt.timeIntervalSince1970 * 1000).rounded() / 1000),
                clientMessageId: clientMessageId)
            var events = [
                try outbox.entry(
                    ChatMessageSent(
                        messageId: message.id, orderId: orderId, senderId: identity.userId, senderRole: identity.role,
                        senderName: senderName, text: text, clientMessageId: clientMessageId, sentAt: message.sentAt),
                    aggregateId: orderId)
            ]
            if let recipient = room?.counterpart(of: identity.userId) {
                if settings.pushPolicy == .always || !present.contains(recipient) {
                    events.append(
                        try outbox.entry(
                            ChatRules.push(for: message, orderId: orderId, recipient: recipient),
                            aggregateId: recipient))
                }
            }
            return try await store.send(
                message, messageId: messageId, quickReplyId: quickReplyId, emits: emits, except: socketId,
                events: events, outbox: outbox, on: connection)
        }
    }

    /// A page of the room's messages, newest first, for someone who may read it.
    package func history(orderId: String, identity: Identity, before: Int64?, limit: Int) async throws
        -> [ChatMessageView]
    {
        try await database.withConnection { connection in
            try ChatRules.requireRead(try await store.room(orderId, on: connection), orderId: orderId, by: identity)
            return try await store.messages(orderId: orderId, before: before, limit: limit, on: connection)
        }
    }

    /// Forgets socket `socketId`'s presence in its room (it left the room; still connected).
    package func leave(socketId: String) async throws {
        try await database.withConnection { try await presence.leave(socketId: socketId, on: $0) }
    }

    /// Deletes the messages of chats closed more than `CHAT_CLOSED_RETENTION_DAYS` ago, a batch at a time;
    /// returns how many chats it purged.
    package func purgeClosedChats(batch: Int = 500) async throws -> Int {
        var purged = 0
        while true {
            let now = self.now()
            let count = try await database.transaction {
                try await store.purgeClosed(before: now - settings.closedRetention, now: now, limit: batch, on: $0)
            }
            purged += count
            if count < batch { return purged }
        }
    }

    /// orders.events, once per service (inbox): keep rooms in step with orders; close them with a system message. A
    /// rider who loses the room gets a ``ChatAccessRevoked`` in the same transaction.
    package func project(_ event: DecodedEvent, on connection: PostgresConnection) async throws {
        try await projection(of: event)?(connection)
    }

    /// What `event` does to its room, to run in the consumer's transaction; nil for the orders.events rooms do not
    /// follow (such as an order accepted, ready or picked up, and service requests), which the consumer skips
    /// without a transaction.
    package func projection(of event: DecodedEvent) -> EventConsumer.Step<Void>? {
        switch event.payload {
        case let created as OrderCreated:
            return { try await self.store.openRoom(orderId: created.orderId, customerId: created.customerId, on: $0) }
        case let assigned as RiderAssigned:
            return { connection in
                let previous = try await self.store.assign(
                    assigned.rider, orderId: assigned.orderId, customerId: assigned.customerId, on: connection)
                try await self.revoke(previous, unlessItIs: assigned.rider, orderId: assigned.orderId, on: connection)
            }
        case let reassigned as RiderReassigned:
            return { connection in
                let previous = try await self.store.assign(
                    reassigned.rider, orderId: reassigned.orderId, customerId: reassigned.customerId, on: connection)
                try await self.revoke(
                    previous, unlessItIs: reassigned.rider, orderId: reassigned.orderId, on: connection)
            }
        case let unassigned as RiderUnassigned:
            return { connection in
                let previous = try await self.store.unassign(
                    orderId: unassigned.orderId, customerId: unassigned.customerId, on: connection)
                try await self.revoke(previous, unlessItIs: nil, orderId: unassigned.orderId, on: connection)
            }
        case let delivered as OrderDelivered:
            return {
                try await self.close(
                    delivered.orderId, customerId: delivered.customerId, reason: "OrderDelivered", on: $0)
            }
        case let cancelled as OrderCancelled:
            return {
                try await self.close(
                    cancelled.orderId, customerId: cancelled.customerId, reason: "OrderCancelled", on: $0)
            }
        default:
            return nil
        }
    }

    /// Tells `previous` they lost the room of `orderId` (`access_revoked` to their sockets), unless they are its
    /// rider still (`current`), and takes their sockets out of the room as the change commits, in order with the
    /// notices of the room's emits: a message committed after does not reach them (it did when only the
    /// ``ChatAccessRevoked``, on the broker a few milliseconds to seconds later, took them out). That event stays
    /// the durable way: an instance that lost the store's notices meanwhile takes their sockets out when it comes.
    private func revoke(
        _ previous: PersonRef?, unlessItIs current: PersonRef?, orderId: String, on connection: PostgresConnection
    ) async throws {
        guard let previous, previous.id != current?.id else { return }
        try await emits.removeUser(previous.id, fromRoom: ChatRoom.socketRoom(orderId), on: connection)
        try await emits.emit("access_revoked", AccessRevoked(orderId: orderId), toUser: previous.id, on: connection)
        try await outbox.enqueue(
            ChatAccessRevoked(orderId: orderId, riderId: previous.id, revokedAt: now()), aggregateId: orderId,
            on: connection, logger: logger)
    }

    private func close(_ orderId: String, customerId: String, reason: String, on connection: PostgresConnection)
        async throws
    {
        guard
            let message = try await store.close(
                orderId: orderId, customerId: customerId, reason: reason, now: now(), on: connection)
        else { return }
        try await emits.emit(
            "chat_closed", ChatClosedNotice(orderId: orderId), toRoom: ChatRoom.socketRoom(orderId), on: connection)
        try await outbox.enqueue(
            ChatClosed(orderId: orderId, reason: reason, closedAt: message.sentAt), aggregateId: orderId,
            on: connection, logger: logger)
    }
}
