-- Why the system took a rider Offline (no_precise_location, unreachable), shown to the rider until they go Online
-- again; NULL when the rider chose to go Offline.
ALTER TABLE riders ADD COLUMN offline_reason text CHECK (offline_reason IN ('no_precise_location', 'unreachable'));
CREATE INDEX riders_online_fix ON riders (location_recorded_at) WHERE status = 'online';
