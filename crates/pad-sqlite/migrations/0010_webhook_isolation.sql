-- Webhook isolation (docs/webhooks.md, "Isolation", "Paused subscriptions",
-- "A full queue"). Same meaning as PostgreSQL's 0010.
-- When the subscription was paused (an event failed for good); NULL: active.
ALTER TABLE webhooks ADD COLUMN paused_at INTEGER;
-- Queued deliveries dropped past the per-subscription cap, ever.
ALTER TABLE webhooks ADD COLUMN dropped INTEGER NOT NULL DEFAULT 0;
-- Due deliveries are found from each subscription's oldest row, through the
-- UNIQUE (webhook_id, event_id) index: the rows behind it are never read, so
-- the index over every row's next attempt only cost inserts.
DROP INDEX webhook_outbox_due;
