-- Devices, notifications and their delivery log. A notification is pushed to every device its user has when it
-- arrives; each (notification, device) pair is a delivery, retried with backoff until sent or given up (then a
-- dead letter).
CREATE TABLE devices (
    token text PRIMARY KEY,
    user_id text NOT NULL,
    platform text NOT NULL CHECK (platform IN ('android', 'ios')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX devices_by_user ON devices (user_id);

CREATE TABLE notifications (
    notification_id text PRIMARY KEY,
    user_id text NOT NULL,
    kind text NOT NULL,
    title text NOT NULL,
    body text NOT NULL,
    data jsonb NOT NULL,
    priority text NOT NULL CHECK (priority IN ('high', 'normal')),
    collapse_key text,
    ttl_seconds integer,
    sound text,
    correlation_id text,
    -- pending (deliveries under way), sent (at least one device got it), failed (none did), no_devices.
    status text NOT NULL CHECK (status IN ('pending', 'sent', 'failed', 'no_devices')),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notifications_by_user ON notifications (user_id, created_at DESC);

CREATE TABLE deliveries (
    id bigserial PRIMARY KEY,
    notification_id text NOT NULL REFERENCES notifications (notification_id),
    token text NOT NULL,
    platform text NOT NULL,
    -- pending (due at next_attempt_at), sending (leased by an instance until leased_until), sent, failed,
    -- token_removed (the provider said the token is dead).
    status text NOT NULL CHECK (status IN ('pending', 'sending', 'sent', 'failed', 'token_removed')),
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    leased_until timestamptz,
    provider_status integer,
    provider_answer text,
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (notification_id, token)
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_leased ON deliveries (leased_until) WHERE status = 'sending';

CREATE TABLE push_dead_letters (
    id bigserial PRIMARY KEY,
    delivery_id bigint NOT NULL REFERENCES deliveries (id),
    notification_id text NOT NULL,
    token text NOT NULL,
    platform text NOT NULL,
    reason text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
