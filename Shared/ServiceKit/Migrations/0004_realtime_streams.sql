-- The realtime store of the service's Socket.IO namespaces (RealtimePlatform's PostgresRealtimeStore): each room's
-- stream of recoverable emits, numbered per room under the stream row's lock (so a room's emits commit in offset
-- order), with an epoch that changes whenever the stream begins again; each room's latest values (positions, ETAs:
-- ephemeral, so unlogged); and the sessions of sockets that may recover on any instance.
--
-- A busy room's stream row is updated by every emit (the admins' room on /orders by every order's update), so the
-- update must stay on its page (HOT): `updated_at`, which an index trims by, moves only when an hour old, and each
-- page keeps room for new versions. Moved on every emit, each update added index entries and a page, and the
-- emit's look-up walked every dead version: 48 ms an emit and 190 pickups a second instead of 500
-- (`Benchmarks/order-pickup.sh 3000 32`).
CREATE TABLE realtime_streams (
    namespace text NOT NULL,
    room text NOT NULL,
    epoch text NOT NULL,
    top bigint NOT NULL,
    -- When the stream was last emitted to, to within an hour.
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, room)
) WITH (fillfactor = 50);
CREATE INDEX realtime_streams_by_time ON realtime_streams (updated_at);

CREATE TABLE realtime_emits (
    namespace text NOT NULL,
    room text NOT NULL,
    epoch text NOT NULL,
    "offset" bigint NOT NULL,
    packet text NOT NULL,
    -- Binary attachments, base64.
    attachments text[] NOT NULL DEFAULT '{}',
    except_socket text,
    emitted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, room, epoch, "offset")
);
CREATE INDEX realtime_emits_by_time ON realtime_emits (emitted_at);

CREATE UNLOGGED TABLE realtime_latest (
    namespace text NOT NULL,
    room text NOT NULL,
    key text NOT NULL,
    packet text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, room, key)
);
CREATE INDEX realtime_latest_by_time ON realtime_latest (updated_at);

CREATE TABLE realtime_sessions (
    pid text PRIMARY KEY,
    namespace text NOT NULL,
    sid text NOT NULL,
    user_id text,
    -- {"<room>": {"epoch": "<epoch>" | null, "offset": <n>}}: where the socket was in each room when it joined.
    rooms jsonb NOT NULL,
    state text NOT NULL CHECK (state IN ('connected', 'disconnected')),
    generation integer NOT NULL,
    owner text NOT NULL,
    changed_at timestamptz NOT NULL
);
CREATE INDEX realtime_sessions_by_time ON realtime_sessions (changed_at);
