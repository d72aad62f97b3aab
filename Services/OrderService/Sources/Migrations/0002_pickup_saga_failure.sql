-- A pickup saga ends failed (visible to admins) when a step cannot succeed: the customer's push failed for good,
-- or steps did not report back after SAGA_MAX_REPUBLISHES republishes. It is never republished after that.
ALTER TABLE pickup_sagas ADD COLUMN failed_at timestamptz, ADD COLUMN failure text;
DROP INDEX pickup_sagas_open;
CREATE INDEX pickup_sagas_open ON pickup_sagas (started_at) WHERE completed_at IS NULL AND failed_at IS NULL;
