-- Lease handles, failures, deferral and the last lease (docs/leases.md L14-L18).

-- L17: each grant's handle, allocated per workspace; never reused.
ALTER TABLE workspaces ADD COLUMN next_lease_id INTEGER NOT NULL DEFAULT 1;
-- L14: backoff after a failure and the failure quarantine threshold.
ALTER TABLE workspaces ADD COLUMN retry_backoff_base_seconds INTEGER NOT NULL DEFAULT 30;
ALTER TABLE workspaces ADD COLUMN retry_backoff_max_seconds INTEGER NOT NULL DEFAULT 3600;
ALTER TABLE workspaces ADD COLUMN quarantine_after_failures INTEGER NOT NULL DEFAULT 3;

-- The handle of the lease in the lease_* columns (live or not).
ALTER TABLE items ADD COLUMN lease_id INTEGER;
-- Which lease wrote lease_note, so an ended lease shows only its own note.
ALTER TABLE items ADD COLUMN lease_note_lease_id INTEGER;
-- L16: claim-next and the frontier skip the item until then.
ALTER TABLE items ADD COLUMN not_before INTEGER;
-- L14.
ALTER TABLE items ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE items ADD COLUMN retry_at INTEGER;
ALTER TABLE items ADD COLUMN last_failure_note TEXT;
-- L18: the last lease that ended (an unrecorded expiry is derived from lease_*).
ALTER TABLE items ADD COLUMN last_lease_id INTEGER;
ALTER TABLE items ADD COLUMN last_lease_epoch INTEGER;
ALTER TABLE items ADD COLUMN last_lease_holder TEXT;
ALTER TABLE items ADD COLUMN last_lease_session_id TEXT;
ALTER TABLE items ADD COLUMN last_lease_acquired_at INTEGER;
ALTER TABLE items ADD COLUMN last_lease_ended_at INTEGER;
ALTER TABLE items ADD COLUMN last_lease_ended TEXT
    CHECK (last_lease_ended IN ('expired', 'released', 'broken', 'failed', 'completed'));
ALTER TABLE items ADD COLUMN last_lease_note TEXT;
