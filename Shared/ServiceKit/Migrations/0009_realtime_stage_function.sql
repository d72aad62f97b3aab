-- Stages an emit to each of `rooms`, numbered as the transaction commits (0006's trigger), as a function: a
-- statement of the caller's can stage its emits with the change and its outbox events in one round trip
-- (`OrderStore.record`), as `realtime_emit` (0007) does for emits numbered in place. It takes the same arguments as
-- `realtime_emit`, so that either call takes the same values; the channel is not used here (the trigger notifies
-- its schema's). PL/pgSQL, as 0007's functions, so that its plan is kept. Returns the rows staged.
CREATE FUNCTION realtime_stage(
    namespace text, rooms text[], packet text, attachments text[], except_socket text, notify_packet boolean,
    channel text
) RETURNS integer
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO realtime_staged (namespace, room, packet, attachments, except_socket, notify_packet, first_of_statement)
    SELECT realtime_stage.namespace, wanted.room, realtime_stage.packet, realtime_stage.attachments,
           realtime_stage.except_socket, realtime_stage.notify_packet, wanted.position = 1
    FROM unnest(realtime_stage.rooms) WITH ORDINALITY AS wanted (room, position)
    ORDER BY wanted.position;
    RETURN cardinality(realtime_stage.rooms);
END
$$;
