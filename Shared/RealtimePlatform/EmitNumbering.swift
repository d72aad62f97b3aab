/// When an emit written in a transaction takes its offset in each room's stream. Either way the room's stream row
/// stays locked from then until the transaction ends, so a room's emits commit in offset order.
package enum EmitNumbering: Sendable {
    /// In the statement that writes it: the cheapest, for rooms few transactions write at once (a chat's two
    /// parties, a rider's offers). Two transactions emitting to one room take turns from emit to commit.
    case inPlace
    /// As the transaction commits (a deferred trigger, migration `0006_realtime_staged_emits.sql`): for rooms many
    /// transactions write at once (every order's update goes to the admins' room), which then wait for each other
    /// only while committing. Costs a staged row and the trigger: tried for chat (`INSTANCES=2 Benchmarks/chat.sh
    /// 1000 500 20`, run alternately), delivery p99 was 34-275 ms over three runs against 18-49 ms in place.
    case atCommit
}
