-- Long polls (docs/api.md, "Batches and long polls"): nothing to store. One
-- process writes a SQLite database, and the server wakes its own waiting
-- claim-nexts when it commits; PostgreSQL's 0011 adds the notification that
-- carries the same wake-up between instances.
SELECT 1;
