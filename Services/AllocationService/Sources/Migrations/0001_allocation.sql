-- Rider availability, orders being allocated, and offers.
--
-- Nearest riders: each online rider's position is a point on the unit sphere (a 3-D point of the cube extension,
-- trusted, so the service's own database role can install it), indexed with GiST. Straight-line distance between
-- such points orders riders exactly as great-circle distance does, so the nearest among tens of thousands is a
-- short KNN index walk, bounded by a cube around the vendor.
CREATE EXTENSION IF NOT EXISTS cube SCHEMA public;

CREATE FUNCTION sphere_point(lat double precision, lng double precision) RETURNS public.cube
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN public.cube(ARRAY[cosd(lat) * cosd(lng), cosd(lat) * sind(lng), sind(lat)]);

CREATE TABLE riders (
    rider_id text PRIMARY KEY,
    name text NOT NULL,
    status text NOT NULL CHECK (status IN ('offline', 'online', 'offered', 'delivering')),
    lat double precision,
    lng double precision,
    accuracy_meters double precision,
    location_recorded_at timestamptz,
    current_order_id text,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX riders_online_position ON riders USING gist (sphere_point(lat, lng)) WHERE status = 'online';

CREATE TABLE allocations (
    order_id text PRIMARY KEY,
    customer_id text NOT NULL,
    vendor_name text NOT NULL,
    vendor_address text NOT NULL,
    vendor_lat double precision NOT NULL,
    vendor_lng double precision NOT NULL,
    delivery_area text NOT NULL,
    delivery_lat double precision NOT NULL,
    delivery_lng double precision NOT NULL,
    -- searching (an offer is out or about to be), waiting (nobody eligible; retried at next_attempt_at),
    -- assigned, cancelled, completed.
    status text NOT NULL CHECK (status IN ('searching', 'waiting', 'assigned', 'cancelled', 'completed')),
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    rider_id text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX allocations_waiting ON allocations (next_attempt_at) WHERE status = 'waiting';

CREATE TABLE offers (
    offer_id uuid PRIMARY KEY,
    order_id text NOT NULL REFERENCES allocations (order_id),
    rider_id text NOT NULL REFERENCES riders (rider_id),
    status text NOT NULL CHECK (status IN ('pending', 'accepted', 'rejected', 'timed_out', 'unreachable', 'rescinded')),
    distance_km double precision NOT NULL,
    earnings numeric(10, 2) NOT NULL,
    expires_at timestamptz NOT NULL,
    receipt_deadline timestamptz NOT NULL,
    received_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    decided_at timestamptz
);
-- One offer at a time per rider, and per order: enforced here, not only in memory.
CREATE UNIQUE INDEX offers_one_pending_per_rider ON offers (rider_id) WHERE status = 'pending';
CREATE UNIQUE INDEX offers_one_pending_per_order ON offers (order_id) WHERE status = 'pending';
CREATE INDEX offers_pending_deadlines ON offers (expires_at) WHERE status = 'pending';
CREATE INDEX offers_by_order ON offers (order_id, rider_id);
