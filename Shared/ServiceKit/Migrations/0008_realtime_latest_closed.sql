-- A room's latest values can be closed in the transaction of a change (a tracked job that ended): the row of each
-- closed key stays, marked, so that an instance still writing that key (it learns of the change a moment later)
-- meets the mark under the row's lock and writes nothing, tells nothing. Recovering sockets are given no closed
-- value. Reopening deletes the marks.
ALTER TABLE realtime_latest ADD COLUMN closed boolean NOT NULL DEFAULT false;
