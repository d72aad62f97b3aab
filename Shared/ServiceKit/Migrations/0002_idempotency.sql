-- Responses of state-changing requests by Idempotency-Key, stored in the same transaction as the change, so a
-- retry of the same request returns the first answer and changes nothing.
CREATE TABLE idempotency_keys (
    user_id text NOT NULL,
    idempotency_key text NOT NULL,
    -- Method, path and a hash of the body: the same key with another request is refused.
    request_fingerprint text NOT NULL,
    status integer NOT NULL,
    response_body bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, idempotency_key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

-- A stalled step may be republished with the same event id (consumers deduplicate by it).
ALTER TABLE outbox DROP CONSTRAINT outbox_event_id_key;
CREATE INDEX outbox_event_id ON outbox (event_id);
