-- ServiceKit's own tables, created in every service's schema.

-- Events written in the same transaction as the state change they describe, published by the outbox relay.
CREATE TABLE outbox (
    id bigserial PRIMARY KEY,
    event_id uuid NOT NULL UNIQUE,
    topic text NOT NULL,
    message_key text NOT NULL,
    event_type text NOT NULL,
    -- The exact bytes published (the JSON envelope).
    payload text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz,
    attempts integer NOT NULL DEFAULT 0,
    last_error text
);
CREATE INDEX outbox_pending ON outbox (id) WHERE published_at IS NULL;
CREATE INDEX outbox_published_at ON outbox (published_at) WHERE published_at IS NOT NULL;

-- Events a consumer already applied, so a redelivered event has its effect once.
CREATE TABLE inbox (
    consumer text NOT NULL,
    event_id uuid NOT NULL,
    event_type text NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);

-- Messages a consumer could not read or apply, kept instead of lost.
CREATE TABLE dead_letters (
    id bigserial PRIMARY KEY,
    consumer text NOT NULL,
    topic text NOT NULL,
    kafka_partition integer NOT NULL,
    kafka_offset bigint NOT NULL,
    message_key text,
    payload bytea NOT NULL,
    error text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
