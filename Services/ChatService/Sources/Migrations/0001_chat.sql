-- Chat rooms (a projection of orders.events), their messages, and who is in which room right now.
-- Only what chat needs is stored: ids, the rider's display name, and the messages themselves.

CREATE TABLE chat_rooms (
    order_id text PRIMARY KEY,
    customer_id text NOT NULL,
    rider_id text,
    rider_name text,
    -- waiting_for_rider until a rider is assigned; closed once the order is delivered or cancelled.
    status text NOT NULL CHECK (status IN ('waiting_for_rider', 'open', 'closed')),
    closed_reason text,
    closed_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE chat_messages (
    id bigserial PRIMARY KEY,
    order_id text NOT NULL REFERENCES chat_rooms (order_id),
    sender_id text,
    sender_role text NOT NULL CHECK (sender_role IN ('customer', 'rider', 'system')),
    sender_name text NOT NULL,
    text text NOT NULL,
    quick_reply_id text,
    client_message_id text,
    sent_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chat_messages_by_order ON chat_messages (order_id, id DESC);
-- The app's automatic resend after a network loss carries the same client message id: stored once.
CREATE UNIQUE INDEX chat_messages_client_id ON chat_messages (order_id, sender_id, client_message_id)
    WHERE client_message_id IS NOT NULL;

-- Sockets in rooms, across instances: a recipient with none gets a push instead.
CREATE TABLE chat_presence (
    socket_id text PRIMARY KEY,
    order_id text NOT NULL,
    user_id text NOT NULL,
    instance_id text NOT NULL,
    seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chat_presence_by_room ON chat_presence (order_id, user_id);
