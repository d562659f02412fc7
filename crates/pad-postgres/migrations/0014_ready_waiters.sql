-- Wake-ups only while someone waits (docs/api.md, "Wake-ups only while
-- someone waits"). A transaction that notified takes a database-wide lock
-- just before it commits and holds it until its commit is flushed, so
-- notifying transactions commit one at a time; most of the time no instance
-- has a claim-next waiting and the notification is for no one.
--
-- An instance with a waiting claim-next keeps a row here, keyed by the
-- backend of the connection it listens on (a row whose backend is gone is
-- removed by the next instance that arms). Unlogged: after a crash the table
-- is empty, and every listener, its connection lost, arms again.
CREATE UNLOGGED TABLE ready_waiters (
    pid integer PRIMARY KEY,
    since timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The notifying statement takes the shared advisory lock 8097863966176405876
-- ('pad_wait' as bytes) before it looks for a row; an instance arms by
-- inserting its row and taking the same lock exclusively in one transaction.
-- So either a statement's look (a fresh snapshot, taken after its lock) sees
-- the row, or the arming waited for that statement's transaction to end and
-- the waiter's next look sees its change: no change goes unseen.
CREATE OR REPLACE FUNCTION pad_notify_ready() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM new_events WHERE type NOT IN ('lease.claimed', 'comment.created')) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(8097863966176405876);
    IF EXISTS (SELECT FROM ready_waiters) THEN
        PERFORM pg_notify('pad_ready', ready.workspace_id::text)
        FROM (
            SELECT DISTINCT workspace_id FROM new_events
            WHERE type NOT IN ('lease.claimed', 'comment.created')
        ) ready;
    END IF;
    RETURN NULL;
END
$$;
