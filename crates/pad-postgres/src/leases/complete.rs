//! Complete's two statements (L15): the lock that reads the lease and the
//! status, and every write in one.

/// Locks an item for [`complete`] and reads what the decision needs: the
/// lease and the status (a complete's version only moves the status). The
/// item as left comes back from [`COMPLETE`].
pub(super) const LOCK_FOR_COMPLETE: &str =
    concat!(locked_item!(concat!(lease_row!(), ", status")), " SELECT * FROM cur");

/// L15's writes once `decide_end` allowed them, as one statement: the status
/// (if it changes: a content change, with its history version and
/// `item.updated`), the lease's end (L18) and `lease.released`, both events'
/// webhook deliveries, and the item as left. The row is locked by this
/// transaction, so the snapshot the item is read in is current.
/// $1 item, $2 new status or NULL (unchanged), $3 now, $4 actor, $5 the
/// version's changes (NULL without a status change), $6 workspace, $7 ref,
/// $8 `item.updated` or NULL and $9 its data, $10 `lease.released` and $11
/// its data, $12 'completed'.
pub(super) const COMPLETE: &str = concat!(
    "WITH upd AS (
        UPDATE items SET status = COALESCE($2, status),
            updated_at = CASE WHEN $2 IS NULL THEN updated_at
                ELSE GREATEST($3, updated_at + interval '1 microsecond') END,
            version = version + CASE WHEN $2 IS NULL THEN 0 ELSE 1 END,
            last_success_at = $3, retry_at = NULL, lease_note = NULL, lease_note_holder = NULL,
            lease_note_lease_id = NULL, ",
    ended_lease!("$3", "$12"),
    "
        WHERE id = $1
        RETURNING *
    ),
    history AS (
        INSERT INTO item_versions (item_id, version, actor_id, at, changes)
        SELECT upd.id, (SELECT COALESCE(MAX(v.version), 0) + 1 FROM item_versions v WHERE v.item_id = upd.id),
            $4, upd.updated_at, $5
        FROM upd WHERE $5::jsonb IS NOT NULL
    ),
    ",
    event_slot!(),
    ",
    new_events AS (
        SELECT row_number() OVER (ORDER BY e.k) - 1 AS k, e.type, e.at, e.data
        FROM upd CROSS JOIN LATERAL (VALUES (0, $8::text, upd.updated_at, $9::jsonb),
                                            (1, $10::text, $3::timestamptz, $11::jsonb)) AS e (k, type, at, data)
        WHERE e.type IS NOT NULL
    ),
    ev AS (
        INSERT INTO events (id, workspace_id, type, item_ref, actor_id, at, data)
        SELECT slot.base + slot.n + e.k, $6, e.type, $7, $4, e.at, e.data
        FROM slot, new_events e WHERE slot.n + e.k < 65536
        RETURNING id, workspace_id, type
    ),
    ",
    enqueue_events!(),
    "
    SELECT upd.*, ",
    item_joined_columns!("upd"),
    ", (SELECT count(*) FROM ev) AS events_written FROM upd",
    item_joins!("upd")
);
