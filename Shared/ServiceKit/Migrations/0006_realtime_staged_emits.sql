-- Emits are numbered as their transaction commits, not where they are written.
--
-- Numbering an emit takes its stream row's lock, held until commit. Taken where the emit is written, a busy room's
-- lock (the admins' room on /orders, updated by every order) was held across the rest of the transaction and the
-- client's round trip to COMMIT: pickups waited 62 ms on average for it, 350 a second at p95 235 ms instead of 500
-- (`Benchmarks/order-pickup.sh 3000 32`). Now the transaction only stages its emits; a deferred trigger numbers
-- them at commit, so the lock is held from the trigger to the end of the commit, inside the server. Measured with
-- pgbench, 32 clients each emitting to one shared room: 373 transactions a second numbering in place, 4,251 at
-- commit.
--
-- A room's emits still commit in offset order (its lock is held until the commit ends), and a transaction locks
-- its rooms' rows sorted by namespace and room, so two transactions never wait for each other in a circle.
-- Staged rows live only inside their transaction (deleted by the trigger before it commits): unlogged, and empty
-- after a crash as it must be.
CREATE UNLOGGED TABLE realtime_staged (
    xact xid8 NOT NULL DEFAULT pg_current_xact_id(),
    id bigserial,
    namespace text NOT NULL,
    room text NOT NULL,
    packet text NOT NULL,
    -- Binary attachments, base64.
    attachments text[] NOT NULL DEFAULT '{}',
    except_socket text,
    -- Whether the packet goes inside the notification (it fits, and has no attachments).
    notify_packet boolean NOT NULL,
    -- The first row a statement stages: the trigger fires for it alone (while the rooms stay locked, each firing
    -- counts).
    first_of_statement boolean NOT NULL,
    PRIMARY KEY (xact, id)
);

-- Numbers every emit its transaction staged, in the order they were staged per room: the first firing in a
-- transaction does the work, later ones (a transaction that staged in several statements) find nothing left. Then
-- notifies each, in the order staged, on the channel PostgresRealtimeStore listens on (the schema's name and
-- `_realtime`).
CREATE FUNCTION realtime_number_staged() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    numbered integer;
BEGIN
    WITH staged AS (
        DELETE FROM realtime_staged WHERE xact = NEW.xact
        RETURNING id, namespace, room, packet, attachments, except_socket, notify_packet
    ), counts AS (
        SELECT namespace, room, count(*) AS emits FROM staged GROUP BY namespace, room
    ), stream AS (
        INSERT INTO realtime_streams AS s (namespace, room, epoch, top)
        SELECT namespace, room, substr(md5(random()::text || clock_timestamp()::text || room), 1, 8), emits
        FROM counts
        ORDER BY namespace, room
        ON CONFLICT (namespace, room) DO UPDATE
        SET top = s.top + excluded.top,
            updated_at = CASE WHEN s.updated_at < now() - interval '1 hour' THEN now() ELSE s.updated_at END
        RETURNING namespace, room, epoch, top
    ), placed AS (
        SELECT staged.*, stream.epoch,
               stream.top - count(*) OVER per_room + row_number() OVER (per_room ORDER BY staged.id) AS "offset"
        FROM staged JOIN stream USING (namespace, room)
        WINDOW per_room AS (PARTITION BY staged.namespace, staged.room)
    ), written AS (
        INSERT INTO realtime_emits (namespace, room, epoch, "offset", packet, attachments, except_socket)
        SELECT namespace, room, epoch, "offset", packet, attachments, except_socket FROM placed
    )
    SELECT count(*) INTO numbered
    FROM (
        SELECT pg_notify(TG_TABLE_SCHEMA || '_realtime',
                         concat_ws(E'\t', 'e', namespace, room, epoch, "offset"::text, coalesce(except_socket, ''),
                                   CASE WHEN notify_packet THEN packet END))
        FROM placed
        ORDER BY id
    ) AS notified;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER realtime_number_staged AFTER INSERT ON realtime_staged
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW WHEN (NEW.first_of_statement) EXECUTE FUNCTION realtime_number_staged();
