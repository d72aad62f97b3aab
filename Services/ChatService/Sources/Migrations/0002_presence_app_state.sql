-- Whether the socket's app said it went to the background (`app_state`): its room then gets the message's push.
ALTER TABLE chat_presence ADD COLUMN in_background boolean NOT NULL DEFAULT false;
