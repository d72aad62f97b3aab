-- A vendor dashboard pages through its orders oldest first (GET /v1/vendors/{id}/orders).
CREATE INDEX orders_by_vendor_time ON orders (vendor_id, created_at, id);
DROP INDEX orders_vendor;
