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

-- A statement that may make an item ready takes the shared advisory lock
-- 8097863966176405876 ('pad_wait' as bytes; classid 1885430879, objid
-- 2002872692 in pg_locks) until its transaction ends, and only then looks
-- for a row, in a snapshot taken after the lock. So a transaction that looked
-- before a row was committed still holds the lock when the row commits:
-- arming waits for exactly those (`pad_ready_holders`, then
-- `pad_ready_settled`). Outside READ COMMITTED the look would use the
-- transaction's first snapshot, so such a transaction always notifies (and
-- takes no lock: no arming need wait for it).
CREATE OR REPLACE FUNCTION pad_notify_ready() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ready bigint[] := (
        SELECT array_agg(DISTINCT workspace_id) FROM new_events
        WHERE type NOT IN ('lease.claimed', 'comment.created')
    );
BEGIN
    IF ready IS NULL THEN
        RETURN NULL;
    END IF;
    IF current_setting('transaction_isolation') = 'read committed' THEN
        PERFORM pg_advisory_xact_lock_shared(8097863966176405876);
        IF NOT EXISTS (SELECT FROM ready_waiters) THEN
            RETURN NULL;
        END IF;
    END IF;
    PERFORM pg_notify('pad_ready', ws::text) FROM unnest(ready) AS ws;
    RETURN NULL;
END
$$;

-- The transactions holding the lock above now (their virtual ids), read once
-- an instance's row is committed: each may have looked before the row existed.
CREATE FUNCTION pad_ready_holders() RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(virtualtransaction), '{}') FROM pg_locks
    WHERE locktype = 'advisory' AND classid = 1885430879 AND objid = 2002872692 AND objsubid = 1 AND granted
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
$$;

-- Waits, at most `wait`, until none of `holders` holds the lock, without
-- queueing for the lock itself, so no writer ever waits for an instance to
-- arm; looks again every 5 ms at first, backing off to every 50 ms. True when
-- they all ended; false when `wait` ran out first (the instance is not armed
-- yet: the caller waits again for the same holders).
CREATE FUNCTION pad_ready_settled(holders text[], wait interval) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    deadline timestamptz := clock_timestamp() + wait;
    pause float8 := 0.005;
BEGIN
    WHILE pad_ready_holders() && holders LOOP
        IF clock_timestamp() > deadline THEN
            RETURN false;
        END IF;
        PERFORM pg_sleep(pause);
        pause := least(pause * 2, 0.05);
    END LOOP;
    RETURN true;
END
$$;
