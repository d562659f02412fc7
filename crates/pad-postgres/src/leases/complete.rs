//! Complete's two statements (L15), each for one item or many (the completes
//! of a shared transaction: docs/leases.md, "Completes written together"):
//! the read that locks the leases and the statuses, and every write in one.
//! A complete alone is one statement that reads, decides L15's allowing case
//! and writes only if the row is still as read (docs/leases.md, "One call,
//! one statement").

/// Reads and locks the items named by the arrays $1 workspaces, $2
/// prefixes, $3 numbers, in item order (the order every batch locks in:
/// prefixes by their bytes, as Rust orders them, whatever the database's
/// collation), and what the decision needs: the lease, the status (a
/// complete's version only moves the status) and the version; `db_now` is
/// read once every row is locked. A missing item returns no row. The items
/// as left come back from [`COMPLETE`].
pub(super) const LOCK_FOR_COMPLETE: &str = concat!(
    "WITH prev AS MATERIALIZED (
        SELECT i.workspace_id AS ws_id, i.prefix AS ref_prefix, i.number AS ref_number, ",
    lease_row!(),
    ", status, version
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
/// item's, in the arrays' order. [`COMPLETE_ONE`] gives the same writes
/// another source (`$w`, the CTE `w` with the same columns), a guard on the
/// row (`$guard`) and more columns in the answer (`$more`, from `$from`).
macro_rules! complete_statement {
    () => {
        complete_statement!(
            "WITH w AS (
        SELECT * FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::bigint[], $5::jsonb[],
                             $6::bigint[], $7::text[], $8::jsonb[], $9::jsonb[])
            WITH ORDINALITY AS w (w_id, w_status, w_at, w_actor, w_changes, w_ws, w_ref, w_updated, w_released, w_k)
    )",
            "",
            "",
            ""
        )
    };
    ($w:expr, $guard:expr, $more:expr, $from:expr) => {
        concat!(
            $w,
            ",
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
            ", (SELECT count(*) FROM ev) AS events_written",
            $more,
            " FROM upd",
            $from,
            " ORDER BY upd.w_k"
        )
    };
}

/// L15's writes on rows this transaction has locked: see [`complete_statement!`].
pub(super) const COMPLETE: &str = complete_statement!();

/// A complete alone as one statement, without a transaction (docs/leases.md,
/// "One call, one statement"): it reads the item without a lock (`cur`,
/// with `db_now`), and writes as [`COMPLETE`] does only when L15 allows it
/// on that row: a live lease, named by the handle ($8 epoch, $13 lease id,
/// at least one of them) and held by the claimant ($7 user, $6 holder). The
/// writes' data are built here from the row (the status change to $4, the
/// actor $5, the ref $9): the caller compares them with the rule's. The
/// write happens only if the row is still as read when its lock is taken
/// (PostgreSQL re-checks the guard on the row a concurrent commit left):
/// the same lease, live on the database clock, not renewed since the read
/// (so the lease never ends before a renewal its holder was told of), and
/// the same version (nothing the decision or the history depend on
/// changed). Otherwise it writes nothing and returns no row. The answer
/// adds the row as read (`prev_*`, with `db_now`), for the rule.
///
/// The guard does not name `lease_holder`: every end of a lease clears the
/// expiry with the holder, so a live expiry is a recorded lease, and a
/// guard that said `lease_holder IS NOT NULL` let PostgreSQL find the row
/// by reading every recorded lease (`items_leased_by_expiry`) instead of by
/// its key (docs/operations.md, "Plans on a new database").
pub(super) const COMPLETE_ONE: &str = complete_statement!(
    concat!(
        "WITH cur AS MATERIALIZED (
        SELECT ",
        lease_row!(),
        ", status, version, clock_timestamp() AS db_now
        FROM items WHERE workspace_id = $1 AND prefix = $2 AND number = $3
    ),
    w AS (
        SELECT cur.id AS w_id, CASE WHEN cur.status <> $4::text THEN $4::text END AS w_status,
            cur.db_now AS w_at, $5::bigint AS w_actor,
            CASE WHEN cur.status <> $4::text
                THEN jsonb_build_object('status', jsonb_build_object('from', cur.status, 'to', $4::text)) END AS w_changes,
            $1::bigint AS w_ws, $9::text AS w_ref,
            CASE WHEN cur.status <> $4::text THEN jsonb_build_object('fields', jsonb_build_array('status')) END AS w_updated,
            jsonb_build_object('holder', cur.lease_holder, 'epoch', cur.lease_epoch, 'lease_id', cur.lease_id,
                'reason', NULL, 'ended', $12::text) AS w_released,
            1::bigint AS w_k, cur.lease_id AS read_lease_id, cur.version AS read_version
        FROM cur
        WHERE cur.deleted_at IS NULL AND cur.lease_holder IS NOT NULL AND cur.lease_expires_at > cur.db_now
            AND ($8::bigint IS NOT NULL OR $13::bigint IS NOT NULL)
            AND ($8::bigint IS NULL OR cur.lease_epoch = $8::bigint)
            AND ($13::bigint IS NULL OR cur.lease_id = $13::bigint)
            AND cur.lease_user_id = $7::bigint AND cur.lease_holder = $6::text
    )"
    ),
    " AND items.deleted_at IS NULL AND items.lease_id = w.read_lease_id
          AND items.lease_expires_at > clock_timestamp() AND items.lease_renewed_at <= w.w_at
          AND items.version = w.read_version",
    ", cur.db_now, cur.status AS prev_status, cur.id AS prev_id, cur.deleted_at AS prev_deleted_at,
        cur.lease_holder AS prev_lease_holder, cur.lease_user_id AS prev_lease_user_id,
        cur.lease_session_id AS prev_lease_session_id, cur.lease_epoch AS prev_lease_epoch,
        cur.lease_acquired_at AS prev_lease_acquired_at, cur.lease_renewed_at AS prev_lease_renewed_at,
        cur.lease_expires_at AS prev_lease_expires_at, cur.lease_ttl_seconds AS prev_lease_ttl_seconds,
        cur.lease_hold_until AS prev_lease_hold_until, cur.lease_id AS prev_lease_id,
        cur.lease_note AS prev_lease_note, cur.lease_note_holder AS prev_lease_note_holder",
    " CROSS JOIN cur"
);
