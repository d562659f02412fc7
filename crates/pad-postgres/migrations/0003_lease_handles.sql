-- Lease handles, failures, deferral and the last lease (docs/leases.md
-- L14-L18); the same meaning as SQLite's 0003_lease_handles.sql.

-- L17: every grant's handle. One sequence for the whole database, so handles
-- are unique within each workspace (and beyond) without a per-workspace row
-- lock that would serialize every claim in a workspace.
CREATE SEQUENCE lease_ids;

-- L14: backoff after a failure and the failure quarantine threshold.
ALTER TABLE workspaces
    ADD COLUMN retry_backoff_base_seconds integer NOT NULL DEFAULT 30,
    ADD COLUMN retry_backoff_max_seconds  integer NOT NULL DEFAULT 3600,
    ADD COLUMN quarantine_after_failures  integer NOT NULL DEFAULT 3;

ALTER TABLE items
    -- The handle of the lease in the lease_* columns (live or not).
    ADD COLUMN lease_id              bigint,
    -- Which lease wrote lease_note, so an ended lease shows only its own note.
    ADD COLUMN lease_note_lease_id   bigint,
    -- L16: claim-next and the frontier skip the item until then.
    ADD COLUMN not_before            timestamptz,
    -- L14.
    ADD COLUMN failures              bigint NOT NULL DEFAULT 0,
    ADD COLUMN retry_at              timestamptz,
    ADD COLUMN last_failure_note     text,
    -- L18: the last lease that ended (an unrecorded expiry is derived from lease_*).
    ADD COLUMN last_lease_id         bigint,
    ADD COLUMN last_lease_epoch      bigint,
    ADD COLUMN last_lease_holder     text,
    ADD COLUMN last_lease_session_id text,
    ADD COLUMN last_lease_acquired_at timestamptz,
    ADD COLUMN last_lease_ended_at   timestamptz,
    ADD COLUMN last_lease_ended      text
        CHECK (last_lease_ended IN ('expired', 'released', 'broken', 'failed', 'completed')),
    ADD COLUMN last_lease_note       text;
