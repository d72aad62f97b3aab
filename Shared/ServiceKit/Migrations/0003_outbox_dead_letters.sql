-- A failed row waits until retry_at (growing back-off per row), so one failing event never delays the others.
ALTER TABLE outbox ADD COLUMN retry_at timestamptz;
CREATE INDEX outbox_pending_by_key ON outbox (message_key, id) WHERE published_at IS NULL;

-- Outbox rows the broker refused for good (too large, invalid) after bounded attempts. While one is here, later
-- rows with its key stay pending, so the aggregate's order holds; an operator decides (see docs/operations.md):
-- fix and re-insert the row into the outbox, or drop it, then delete the dead letter to release the key.
CREATE TABLE outbox_dead_letters (
    id bigint PRIMARY KEY,
    event_id uuid NOT NULL,
    topic text NOT NULL,
    message_key text NOT NULL,
    event_type text NOT NULL,
    payload text NOT NULL,
    created_at timestamptz NOT NULL,
    attempts integer NOT NULL,
    error text NOT NULL,
    dead_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_dead_letters_by_key ON outbox_dead_letters (message_key);
