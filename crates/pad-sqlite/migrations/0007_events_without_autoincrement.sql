-- no-transaction
-- The event log without AUTOINCREMENT: every event insert used to update
-- `sqlite_sequence` as well, one more row written per write flow. Without
-- it SQLite gives a new row the largest id plus one, which is the same
-- order as long as the newest event is never deleted; pad deletes no event
-- (docs/api.md, "Events").
--
-- SQLite cannot change a primary key in place: the table is rebuilt, with
-- foreign keys off so the outbox's references to events are kept as they
-- are (the rebuilt table has the same ids), inside one transaction.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;
CREATE TABLE events_rebuilt (
    id            INTEGER PRIMARY KEY,
    workspace_id  INTEGER NOT NULL REFERENCES workspaces(id),
    type          TEXT NOT NULL,
    item_ref      TEXT,
    actor_id      INTEGER REFERENCES users(id),
    at            INTEGER NOT NULL,
    data          TEXT NOT NULL DEFAULT '{}'
);
INSERT INTO events_rebuilt (id, workspace_id, type, item_ref, actor_id, at, data)
    SELECT id, workspace_id, type, item_ref, actor_id, at, data FROM events;
DROP TABLE events;
ALTER TABLE events_rebuilt RENAME TO events;
CREATE INDEX events_by_workspace ON events (workspace_id, id);
COMMIT;
PRAGMA foreign_keys = ON;
