-- No change on SQLite: it checks a foreign key by reading the referenced
-- row, without a lock or a write, and one process writes the database.
-- PostgreSQL's 0013 drops the references every writer of a workspace shared
-- (docs/operations.md, "References PostgreSQL does not check"); this file
-- keeps the two backends' migration numbers mirrored.
SELECT 1;
