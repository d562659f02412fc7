//! Complete's two statements (L15), each for one item or many (the completes
//! of a shared transaction: docs/leases.md, "Completes written together"):
//! the read that locks the leases and the statuses, and every write in one.
//! A complete alone reads without the lock and writes only if the row is
//! still as read (docs/leases.md, "One call, one statement").

/// Reads the items named by the arrays $1 workspaces, $2 prefixes, $3
/// numbers, in item order, and what the decision needs: the lease, the
/// status (a complete's version only moves the status) and the version;
/// `db_now` is read once every row is read. A missing item returns no row.
/// The items as left come back from [`COMPLETE`].
macro_rules! complete_read {
    ($lock:literal) => {
        concat!(
            "WITH prev AS MATERIALIZED (
        SELECT i.workspace_id AS ws_id, i.prefix AS ref_prefix, i.number AS ref_number, ",
            lease_row!(),
            ", status, version
        FROM items i JOIN unnest($1::bigint[], $2::text[], $3::bigint[]) AS w (w_ws, w_prefix, w_number)
            ON i.workspace_id = w.w_ws AND i.prefix = w.w_prefix AND i.number = w.w_number
        ORDER BY i.workspace_id, i.prefix COLLATE \"C\", i.number",
            $lock,
            "
    )
    SELECT prev.*, clock_timestamp() AS db_now FROM prev"
        )
    };
}

/// [`complete_read!`] locking the rows, in item order (the order every
/// batch locks in: prefixes by their bytes, as Rust orders them, whatever
/// the database's collation).
pub(super) const LOCK_FOR_COMPLETE: &str = complete_read!(" FOR UPDATE OF i");

/// [`complete_read!`] without a lock, for a complete alone: its write
/// ([`COMPLETE_ALONE`]) checks that the row is still as read.
pub(super) const READ_FOR_COMPLETE: &str = complete_read!("");

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
macro_rules! complete_statement {
    ($guard:literal) => {
        concat!(
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
        WHERE items.id = w.w_id",
            $guard,
            "
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
        )
    };
}

/// L15's writes on rows this transaction has locked: see [`complete_statement!`].
pub(super) const COMPLETE: &str = complete_statement!("");

/// L15's writes for one item read without a lock ([`READ_FOR_COMPLETE`]),
/// sent without a transaction: it writes only if the item still has the
/// lease the decision ended ($13 its lease id), live on the database clock,
/// not renewed since the read (so the lease never ends before a renewal
/// its holder was told of), and the version read ($14), so nothing changed
/// between the read and this statement that the decision or the item's
/// history depend on. Otherwise it writes nothing and returns no row.
pub(super) const COMPLETE_ALONE: &str = complete_statement!(
    " AND items.deleted_at IS NULL AND items.lease_holder IS NOT NULL AND items.lease_id = $13
          AND items.lease_expires_at > clock_timestamp() AND items.lease_renewed_at <= w.w_at
          AND items.version = $14"
);
