-- Presence is kept by the shared SocketPresence (RealtimePlatform): its tables name the scope `room`, and record
-- whether the socket's app said it went to the background (`app_state`).
ALTER TABLE chat_presence RENAME COLUMN order_id TO room;
ALTER TABLE chat_presence ADD COLUMN in_background boolean NOT NULL DEFAULT false;
