//! Complete's two statements (L15), each for one item or many (the completes
//! of a shared transaction: docs/leases.md, "Completes written together"):
//! the lock that reads the leases and the statuses, and every write in one.

/// Locks the items named by the arrays $1 workspaces, $2 prefixes, $3
/// numbers, in item order (the order every batch locks in: prefixes by
/// their bytes, as Rust orders them, whatever the database's collation), and reads what
/// the decision needs: the lease and the status (a complete's version only
/// moves the status); `db_now` is read once every row is locked. A missing
/// item returns no row. The items as left come back from [`COMPLETE`].
pub(super) const LOCK_FOR_COMPLETE: &str = concat!(
    "WITH prev AS MATERIALIZED (
        SELECT i.workspace_id AS ws_id, i.prefix AS ref_prefix, i.number AS ref_number, ",
    lease_row!(),
    ", status
        FROM items i JOIN unnest($1::bigint[], $2::text[], $3::bigint[]) AS w (w_ws, w_prefix, w_number)
            ON i.workspace_id = w.w_ws AND i.prefix = w.w_prefix AND i.number = w.w_number
        ORDER BY i.workspace_id, i.prefix COLLATE \"C\", i.number
        FOR UPDATE OF i
    )
    SELECT prev.*, clock_timestamp() AS db_now FROM prev"
);

/// L15's writes for items `decide_end` allowed to complete, as one
/// statement, one element of each array per item: the status (if it
/// changes: a content change, with its history version and `item.updated`),
/// the lease's end (L18) and `lease.released`, the events' webhook
/// deliveries, and the items as left, in the arrays' order. The rows are
/// locked by this transaction, so the snapshot the items are read in is
/// current. Arrays: $1 item, $2 new status or NULL (unchanged), $3 now, $4
/// actor, $5 the version's changes (NULL without a status change), $6
/// workspace, $7 ref, $8 `item.updated`'s data or NULL, $9
/// `lease.released`'s data; scalars: $10 `item.updated`, $11
/// `lease.released`, $12 'completed'. An item's events follow the previous
/// item's, in the arrays' order.
pub(super) const COMPLETE: &str = concat!(
    "WITH w AS (
        SELECT * FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::bigint[], $5::jsonb[],
                             $6::bigint[], $7::text[], $8::jsonb[], $9::jsonb[])
            WITH ORDINALITY AS w (w_id, w_status, w_at, w_actor, w_changes, w_ws, w_ref, w_updated, w_released, w_k)
    ),
    upd AS (
        UPDATE items SET status = COALESCE(w.w_status, status),
            updated_at = CASE WHEN w.w_status IS NULL THEN updated_at
                ELSE GREATEST(w.w_at, updated_at + interval '1 microsecond') END,
            version = version + CASE WHEN w.w_status IS NULL THEN 0 ELSE 1 END,
            last_success_at = w.w_at, retry_at = NULL, lease_note = NULL, lease_note_holder = NULL,
            lease_note_lease_id = NULL, ",
    ended_lease!("w.w_at", "$12"),
    "
        FROM w
        WHERE items.id = w.w_id
        RETURNING items.*, w.*
    ),
    history AS (
        INSERT INTO item_versions (item_id, version, actor_id, at, changes)
        SELECT upd.id, (SELECT COALESCE(MAX(v.version), 0) + 1 FROM item_versions v WHERE v.item_id = upd.id),
            upd.w_actor, upd.updated_at, upd.w_changes
        FROM upd WHERE upd.w_changes IS NOT NULL
    ),
    ",
    event_slot!(),
    ",
    new_events AS (
        SELECT row_number() OVER (ORDER BY upd.w_k, e.k) - 1 AS k, upd.w_ws, upd.w_ref, upd.w_actor,
            e.type, e.at, e.data
        FROM upd CROSS JOIN LATERAL (VALUES (0, CASE WHEN upd.w_updated IS NOT NULL THEN $10::text END,
                                                upd.updated_at, upd.w_updated),
                                            (1, $11::text, upd.w_at, upd.w_released)) AS e (k, type, at, data)
        WHERE e.type IS NOT NULL
    ),
    ev AS (
        INSERT INTO events (id, workspace_id, type, item_ref, actor_id, at, data)
        SELECT slot.base + slot.n + e.k, e.w_ws, e.type, e.w_ref, e.w_actor, e.at, e.data
        FROM slot, new_events e WHERE slot.n + e.k < 65536
        RETURNING id, workspace_id, type
    ),
    ",
    enqueue_events!(),
    "
    SELECT upd.*, ",
    item_joined_columns!("upd"),
    ", (SELECT count(*) FROM ev) AS events_written FROM upd",
    item_joins!("upd"),
    " ORDER BY upd.w_k"
);
