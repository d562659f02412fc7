-- Wake-ups only while someone waits (docs/api.md): nothing to store. One
-- process writes a SQLite database and wakes its own waiting claim-nexts;
-- PostgreSQL's 0014 makes its notifications conditional on a waiter.
SELECT 1;
