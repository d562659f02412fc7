-- Scoped tokens and server-side web sessions: the same tables and meaning as
-- crates/pad-sqlite/migrations/0004_scoped_tokens_sessions.sql.
ALTER TABLE tokens ADD COLUMN workspace_id bigint REFERENCES workspaces(id);
ALTER TABLE tokens ADD COLUMN role text CHECK (role IN ('owner', 'editor', 'viewer'));
ALTER TABLE tokens ADD CONSTRAINT tokens_scope_whole CHECK ((workspace_id IS NULL) = (role IS NULL));

CREATE INDEX tokens_live_by_user ON tokens (user_id) WHERE revoked_at IS NULL;
CREATE INDEX tokens_by_workspace ON tokens (workspace_id) WHERE workspace_id IS NOT NULL;

CREATE TABLE sessions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    hash        text NOT NULL UNIQUE,
    token_id    bigint NOT NULL REFERENCES tokens(id),
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz
);
