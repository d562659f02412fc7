-- No change on SQLite: its writes commit one at a time, so event ids already
-- become visible in increasing order. This file keeps the two backends'
-- migration numbers mirrored (PostgreSQL's 0005 changes how event ids are
-- assigned; see docs/api.md, "Event order on PostgreSQL").
SELECT 1;
