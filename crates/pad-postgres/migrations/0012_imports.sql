-- Imports by key (docs/api.md, "Import"): an import writes its row in its
-- own transaction, so a key found here was imported whole, and a second
-- import with it answers `result` (the first one's answer, JSON) and writes
-- nothing.
CREATE TABLE imports (
    workspace_id  bigint NOT NULL REFERENCES workspaces(id),
    import_key    text NOT NULL,
    created_by    bigint NOT NULL REFERENCES users(id),
    created_at    timestamptz NOT NULL,
    result        text NOT NULL,
    PRIMARY KEY (workspace_id, import_key)
);
