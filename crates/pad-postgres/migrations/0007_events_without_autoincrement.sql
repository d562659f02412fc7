-- No change on PostgreSQL: its event ids come from the writing transaction
-- (0005), with no sequence table to update. This file keeps the two
-- backends' migration numbers mirrored (SQLite's 0007 drops AUTOINCREMENT
-- from its event log).
SELECT 1;
