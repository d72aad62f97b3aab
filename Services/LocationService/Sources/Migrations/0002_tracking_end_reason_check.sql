-- Why tracking ended is one of TrackingStopReason's values, like the other enum columns (the service reads it as
-- that enum and would refuse the row otherwise).
ALTER TABLE tracking_jobs ADD CONSTRAINT tracking_jobs_end_reason_check
    CHECK (end_reason IS NULL
           OR end_reason IN ('delivered', 'cancelled', 'arrived', 'travel_mode_off', 'time_limit', 'completed'));
