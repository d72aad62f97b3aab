-- Tracked jobs (delivery orders and service requests): who, where to, and the state their watchers see. Never a
-- courier's position: positions live in memory and on couriers.positions only (US-072).
CREATE TABLE tracking_jobs (
    job_id text PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('delivery', 'service_request')),
    customer_id text NOT NULL,
    courier_id text,
    -- The customer's address (the delivery address or the service address).
    destination_lat double precision NOT NULL,
    destination_lng double precision NOT NULL,
    destination_label text NOT NULL,
    -- pending (not under way yet), travelling (picked up / on the way), finished.
    phase text NOT NULL CHECK (phase IN ('pending', 'travelling', 'finished')),
    travel_mode boolean NOT NULL DEFAULT false,
    travel_mode_since timestamptz,
    state text NOT NULL CHECK (state IN ('not_started', 'waiting_for_travel_mode', 'live', 'stale', 'ended')),
    end_reason text,
    tracking_started_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tracking_jobs_tracked ON tracking_jobs (courier_id) WHERE state IN ('live', 'stale');
CREATE INDEX tracking_jobs_started ON tracking_jobs (tracking_started_at) WHERE state IN ('live', 'stale');
