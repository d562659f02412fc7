-- Scoped tokens and server-side web sessions (docs/api.md, "Tokens" and
-- "Web sessions"). A token with a workspace_id reaches that workspace only,
-- with at most `role` there; NULL in both is a token for all of its user's
-- workspaces.
ALTER TABLE tokens ADD COLUMN workspace_id INTEGER REFERENCES workspaces(id);
ALTER TABLE tokens ADD COLUMN role TEXT CHECK (role IN ('owner', 'editor', 'viewer'));

-- The live-token cap counts a user's live tokens; owners list a workspace's.
CREATE INDEX tokens_live_by_user ON tokens (user_id) WHERE revoked_at IS NULL;
CREATE INDEX tokens_by_workspace ON tokens (workspace_id) WHERE workspace_id IS NOT NULL;

-- A web session: the SHA-256 of its random id (the cookie's value), the token
-- it was opened with (whose user and scope it acts as), and its end.
CREATE TABLE sessions (
    id          INTEGER PRIMARY KEY,
    hash        TEXT NOT NULL UNIQUE,
    token_id    INTEGER NOT NULL REFERENCES tokens(id),
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
