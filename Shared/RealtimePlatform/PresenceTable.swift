/// A presence table of a service's schema, `(socket_id text PRIMARY KEY, <room> text, user_id text, instance_id
/// text, seen_at timestamptz, in_background boolean)`: its names are constants of the service, never user input.
package protocol PresenceTable {
    /// The table's name.
    static var table: String { get }
    /// Its room column (chat's predates ``SocketPresence`` and calls it `order_id`).
    static var roomColumn: String { get }
}

extension PresenceTable {
    package static var roomColumn: String { "room" }

    /// SQL true when user `user` has a socket in room `room`, seen after `since`, whose app is in the foreground
    /// (each argument an SQL expression): ``SocketPresence/isPresent(userId:room:now:on:)``'s test, for a
    /// statement that reads presence with other things.
    package static func presentCondition(room: String, user: String, since: String) -> String {
        """
        EXISTS (SELECT 1 FROM \(table) AS present
                WHERE present.\(roomColumn) = \(room) AND present.user_id = \(user) AND present.seen_at > \(since)
                      AND NOT present.in_background)
        """
    }
}
