-- A closed chat's messages are deleted CHAT_CLOSED_RETENTION_DAYS after it closed; the room row stays (it answers
-- "closed") with purged_at set and the rider's name removed.
ALTER TABLE chat_rooms ADD COLUMN purged_at timestamptz;
CREATE INDEX chat_rooms_to_purge ON chat_rooms (closed_at) WHERE status = 'closed' AND purged_at IS NULL;
