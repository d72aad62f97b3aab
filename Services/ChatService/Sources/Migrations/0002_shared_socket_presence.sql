-- Presence is kept by the shared SocketPresence (RealtimePlatform), whose tables name the scope `room`.
ALTER TABLE chat_presence RENAME COLUMN order_id TO room;
