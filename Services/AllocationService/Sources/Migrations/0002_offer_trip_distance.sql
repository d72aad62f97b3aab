-- The whole trip an offer stands for (rider to vendor, vendor to customer): RDR-010-AC-003's "estimated total
-- travel distance". Offers made before this migration have none.
ALTER TABLE offers ADD COLUMN trip_km double precision CHECK (trip_km >= 0);
