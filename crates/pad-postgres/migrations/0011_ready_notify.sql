-- Long polls across instances (docs/api.md, "Batches and long polls"): every
-- statement that appends events which may make an item ready (anything but a
-- grant or a comment) notifies `pad_ready` with the workspace's id. PostgreSQL
-- delivers a notification when its transaction commits, never after a
-- rollback, and the same payload once per transaction.
CREATE FUNCTION pad_notify_ready() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pad_ready', ready.workspace_id::text)
    FROM (
        SELECT DISTINCT workspace_id FROM new_events
        WHERE type NOT IN ('lease.claimed', 'comment.created')
    ) ready;
    RETURN NULL;
END
$$;

CREATE TRIGGER events_notify_ready
    AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION pad_notify_ready();
