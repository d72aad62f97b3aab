-- An offer to a rider without a live socket has no receipt deadline until the offer push's outcome is known:
-- the window starts when the provider accepted the push (PushSent); a push nobody could take (PushFailed) makes
-- the rider unreachable at once.
ALTER TABLE offers ALTER COLUMN receipt_deadline DROP NOT NULL;
