-- Webhooks (docs/webhooks.md). Same tables and meaning as PostgreSQL's 0006.
-- The secret is kept in clear: each delivery is signed with it (HMAC), so a
-- hash would not do. It is shown once, at creation, and never served again.
CREATE TABLE webhooks (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace_id  INTEGER NOT NULL REFERENCES workspaces(id),
    url           TEXT NOT NULL,
    event_types   TEXT NOT NULL DEFAULT '[]', -- JSON array of event types; empty: all
    secret        TEXT NOT NULL,
    created_by    INTEGER REFERENCES users(id),
    created_at    INTEGER NOT NULL
);
CREATE INDEX webhooks_by_workspace ON webhooks (workspace_id);

-- One row per (subscription, event) not yet delivered or given up, written
-- in the event's own transaction. A row is claimed by one instance at a time
-- (claim, claimed_until) and deleted once delivered or failed for good.
CREATE TABLE webhook_outbox (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook_id       INTEGER NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    event_id         INTEGER NOT NULL REFERENCES events(id),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    claim            TEXT,
    claimed_until    INTEGER,
    UNIQUE (webhook_id, event_id)
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at);

-- Every attempt, newest kept per subscription (pad_core::webhook::DELIVERIES_KEPT).
CREATE TABLE webhook_deliveries (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook_id   INTEGER NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    event_id     INTEGER,             -- NULL for a webhook.test delivery
    event_type   TEXT NOT NULL,
    attempt      INTEGER NOT NULL,
    status_code  INTEGER,
    error        TEXT,
    duration_ms  INTEGER NOT NULL,
    outcome      TEXT NOT NULL CHECK (outcome IN ('delivered', 'retrying', 'failed')),
    at           INTEGER NOT NULL
);
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, id);
