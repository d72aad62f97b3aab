-- An emit numbered in place and the outbox's write, as functions: one statement can then write a change together
-- with its emit and its events, in a single round trip (a chat message is one statement, not a transaction of
-- seven round trips). PostgresRealtimeStore and Outbox call these for their own writes too, so each is written once.
-- PL/pgSQL keeps each statement's plan for the connection.

-- Appends an emit to the stream of each of `rooms` of `namespace`, numbered here (the rows stay locked until the
-- transaction ends), and notifies `channel` of each in the order of `rooms`, with the packet when `notify_packet`.
CREATE FUNCTION realtime_emit(
    namespace text, rooms text[], packet text, attachments text[], except_socket text, notify_packet boolean,
    channel text
) RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    notified integer;
BEGIN
    WITH stream AS (
        INSERT INTO realtime_streams AS s (namespace, room, epoch, top)
        SELECT realtime_emit.namespace, wanted.room,
               substr(md5(random()::text || clock_timestamp()::text || wanted.room), 1, 8), 1
        FROM unnest(realtime_emit.rooms) WITH ORDINALITY AS wanted (room, position)
        ORDER BY wanted.position
        ON CONFLICT ON CONSTRAINT realtime_streams_pkey DO UPDATE
        SET top = s.top + 1,
            updated_at = CASE WHEN s.updated_at < now() - interval '1 hour' THEN now() ELSE s.updated_at END
        RETURNING s.room, s.epoch, s.top
    ), written AS (
        INSERT INTO realtime_emits AS e (namespace, room, epoch, "offset", packet, attachments, except_socket)
        SELECT realtime_emit.namespace, stream.room, stream.epoch, stream.top, realtime_emit.packet,
               realtime_emit.attachments, realtime_emit.except_socket
        FROM stream
    )
    SELECT count(*) INTO notified
    FROM (
        SELECT pg_notify(realtime_emit.channel,
                         concat_ws(E'\t', 'e', realtime_emit.namespace, stream.room, stream.epoch, stream.top::text,
                                   coalesce(realtime_emit.except_socket, ''),
                                   CASE WHEN realtime_emit.notify_packet THEN realtime_emit.packet END))
        FROM stream
    ) AS notices;
    RETURN notified;
END
$$;

-- Writes events to the outbox in order and tells the relay on `channel` when the transaction commits (one
-- notification per transaction however many rows). Returns how many rows it wrote.
CREATE FUNCTION outbox_write(
    event_ids uuid[], topics text[], message_keys text[], event_types text[], payloads text[], channel text
) RETURNS integer
LANGUAGE plpgsql
AS $$
BEGIN
    IF cardinality(event_ids) = 0 THEN
        RETURN 0;
    END IF;
    INSERT INTO outbox (event_id, topic, message_key, event_type, payload)
    SELECT * FROM unnest(event_ids, topics, message_keys, event_types, payloads);
    PERFORM pg_notify(channel, '');
    RETURN cardinality(event_ids);
END
$$;
