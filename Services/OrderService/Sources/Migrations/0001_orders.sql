-- Vendors, delivery orders, service requests, their immutable event log, and the pickup saga.

CREATE TABLE vendors (
    -- The vendor account's user id (its token's sub).
    id text PRIMARY KEY,
    name text NOT NULL,
    address_line1 text NOT NULL,
    area text NOT NULL,
    lat double precision NOT NULL CHECK (lat BETWEEN -90 AND 90),
    lng double precision NOT NULL CHECK (lng BETWEEN -180 AND 180),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE orders (
    id uuid PRIMARY KEY,
    customer_id text NOT NULL,
    vendor_id text NOT NULL REFERENCES vendors (id),
    status text NOT NULL CHECK (status IN ('PendingVendorAcceptance', 'Preparing', 'ReadyForPickup', 'InTransit', 'Delivered', 'Cancelled')),
    delivery_line1 text NOT NULL,
    delivery_area text NOT NULL,
    delivery_lat double precision NOT NULL,
    delivery_lng double precision NOT NULL,
    payment_mode text NOT NULL CHECK (payment_mode IN ('prepaid', 'cash')),
    total_amount numeric(12, 2) NOT NULL CHECK (total_amount >= 0),
    requires_photo_proof boolean NOT NULL,
    rider_id text,
    rider_name text,
    rider_arrived_at timestamptz,
    -- Incremented by every transition; the event log's sequence.
    version integer NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX orders_customer ON orders (customer_id);
CREATE INDEX orders_vendor ON orders (vendor_id);
CREATE INDEX orders_rider ON orders (rider_id) WHERE rider_id IS NOT NULL;

CREATE TABLE order_proof_photos (
    order_id uuid PRIMARY KEY REFERENCES orders (id),
    content_type text NOT NULL,
    bytes bytea NOT NULL,
    uploaded_by text NOT NULL,
    uploaded_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE service_requests (
    id uuid PRIMARY KEY,
    customer_id text NOT NULL,
    status text NOT NULL CHECK (status IN ('Requested', 'TechnicianAssigned', 'OnTheWay', 'WorkInProgress', 'Completed', 'Cancelled')),
    address_line1 text NOT NULL,
    area text NOT NULL,
    lat double precision NOT NULL,
    lng double precision NOT NULL,
    description text NOT NULL,
    technician_id text,
    technician_name text,
    version integer NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX service_requests_customer ON service_requests (customer_id);
CREATE INDEX service_requests_technician ON service_requests (technician_id) WHERE technician_id IS NOT NULL;

-- Every event of every order and service request, in order. Append-only: the database refuses UPDATE, DELETE
-- and TRUNCATE, whoever asks.
CREATE TABLE order_events (
    id bigserial PRIMARY KEY,
    aggregate_id uuid NOT NULL,
    aggregate_type text NOT NULL CHECK (aggregate_type IN ('order', 'service_request')),
    sequence integer NOT NULL,
    event_id uuid NOT NULL UNIQUE,
    event_type text NOT NULL,
    actor_id text,
    actor_role text,
    -- The envelope as published.
    envelope jsonb NOT NULL,
    occurred_at timestamptz NOT NULL,
    UNIQUE (aggregate_id, sequence)
);

CREATE FUNCTION refuse_event_log_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'order_events is append-only: % is not allowed', TG_OP USING ERRCODE = 'P0001';
END;
$$;
CREATE TRIGGER order_events_append_only BEFORE UPDATE OR DELETE ON order_events
    FOR EACH ROW EXECUTE FUNCTION refuse_event_log_change();
CREATE TRIGGER order_events_no_truncate BEFORE TRUNCATE ON order_events
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_event_log_change();

-- The pickup saga: which of the pickup's downstream steps have reported back.
CREATE TABLE pickup_sagas (
    order_id uuid PRIMARY KEY REFERENCES orders (id),
    pickup_event_id uuid NOT NULL,
    notification_id text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    tracking_started_at timestamptz,
    customer_notified_at timestamptz,
    customer_notification_failure text,
    vendor_updated_at timestamptz,
    completed_at timestamptz,
    republish_count integer NOT NULL DEFAULT 0,
    last_republished_at timestamptz
);
CREATE INDEX pickup_sagas_open ON pickup_sagas (started_at) WHERE completed_at IS NULL;
