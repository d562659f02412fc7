-- Webhooks (docs/webhooks.md). Same tables and meaning as SQLite's 0006.
-- The secret is kept in clear: each delivery is signed with it (HMAC), so a
-- hash would not do. It is shown once, at creation, and never served again.
CREATE TABLE webhooks (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace_id  bigint NOT NULL REFERENCES workspaces(id),
    url           text NOT NULL,
    event_types   text[] NOT NULL DEFAULT '{}', -- empty: all
    secret        text NOT NULL,
    created_by    bigint REFERENCES users(id),
    created_at    timestamptz NOT NULL
);
CREATE INDEX webhooks_by_workspace ON webhooks (workspace_id);

-- One row per (subscription, event) not yet delivered or given up, written
-- in the event's own transaction. A row is claimed by one instance at a time
-- (claim, claimed_until: FOR UPDATE SKIP LOCKED picks it) and deleted once
-- delivered or failed for good.
CREATE TABLE webhook_outbox (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id       bigint NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    event_id         bigint NOT NULL REFERENCES events(id),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    claim            text,
    claimed_until    timestamptz,
    UNIQUE (webhook_id, event_id)
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at);

-- Every attempt, newest kept per subscription (pad_core::webhook::DELIVERIES_KEPT).
CREATE TABLE webhook_deliveries (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id   bigint NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    event_id     bigint,              -- NULL for a webhook.test delivery
    event_type   text NOT NULL,
    attempt      integer NOT NULL,
    status_code  integer,
    error        text,
    duration_ms  bigint NOT NULL,
    outcome      text NOT NULL CHECK (outcome IN ('delivered', 'retrying', 'failed')),
    at           timestamptz NOT NULL
);
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, id);
