-- Imports by key (docs/api.md, "Import"): an import writes its row in its
-- own transaction, so a key found here was imported whole, and a second
-- import with it answers `result` (the first one's answer, JSON) and writes
-- nothing. created_at is microseconds.
CREATE TABLE imports (
    workspace_id  INTEGER NOT NULL REFERENCES workspaces(id),
    import_key    TEXT NOT NULL,
    created_by    INTEGER NOT NULL REFERENCES users(id),
    created_at    INTEGER NOT NULL,
    result        TEXT NOT NULL,
    PRIMARY KEY (workspace_id, import_key)
);
