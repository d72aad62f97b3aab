-- An order its rider picked up is in_transit: operators can no longer re-assign or release it.
ALTER TABLE allocations DROP CONSTRAINT allocations_status_check,
    ADD CONSTRAINT allocations_status_check
        CHECK (status IN ('searching', 'waiting', 'assigned', 'in_transit', 'cancelled', 'completed'));
