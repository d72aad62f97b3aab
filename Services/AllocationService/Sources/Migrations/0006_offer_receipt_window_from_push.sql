-- An offer to a rider without a live socket awaits its push's outcome: its receipt deadline is a fallback (the
-- receipt window plus OFFER_PUSH_GRACE_SECONDS) until the provider accepts the push (PushSent: the window then
-- starts) or the push cannot reach any device (PushFailed: the rider is unreachable at once).
ALTER TABLE offers ADD COLUMN awaiting_push boolean NOT NULL DEFAULT false;
