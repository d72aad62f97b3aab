-- Each change of a job counts up its version, which `tracking_status` and the `track` view carry: an app that gets
-- them out of order (a view read before a change whose event came first) keeps the newer.
ALTER TABLE tracking_jobs ADD COLUMN version bigint NOT NULL DEFAULT 0;
