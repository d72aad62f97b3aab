-- Riders' live /rider sockets on any instance (the shared SocketPresence), and whether their app is in the
-- background: an order cancelled under a rider is pushed to them unless they have a foreground socket.
CREATE TABLE rider_presence (
    socket_id text PRIMARY KEY,
    room text NOT NULL,
    user_id text NOT NULL,
    instance_id text NOT NULL,
    seen_at timestamptz NOT NULL,
    in_background boolean NOT NULL DEFAULT false
);
CREATE INDEX rider_presence_by_user ON rider_presence (user_id, room);
