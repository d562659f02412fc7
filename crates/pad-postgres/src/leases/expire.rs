//! The expiry statements (L5, L13): one row a caller has locked, and the
//! background observer's batch.

/// L5/L13 on a row the caller has locked: forgets a lease that has expired
/// and counts the expiry. $1 item id, $2 the caller's clock. A recorded
/// expiry is a recorded lease, so the guard does not name `lease_holder`:
/// naming it let PostgreSQL look for the row among every expired lease
/// (`items_leased_by_expiry`) instead of by its key (docs/operations.md,
/// "Plans on a new database").
pub(super) const EXPIRE: &str = concat!(
    "UPDATE items SET lease_holder = NULL, lease_user_id = NULL, lease_session_id = NULL,
        lease_acquired_at = NULL, lease_renewed_at = NULL, lease_expires_at = NULL, lease_ttl_seconds = NULL, lease_hold_until = NULL,
        lease_expiries = lease_expiries + 1, ",
    expired_as_last!(""),
    " WHERE id = $1 AND lease_expires_at <= $2
    RETURNING lease_expiries, labels"
);

/// L5/L13 for every instance's background observer: takes expired leases
/// no one else is handling (`SKIP LOCKED`), forgets and counts them. A claim
/// or release that locked the row first records the expiry itself, and the
/// re-check after the lock skips rows that were claimed again, so each
/// expiry is recorded exactly once across instances.
pub(super) const OBSERVE_EXPIRED: &str = concat!(
    "WITH expired AS MATERIALIZED (
        SELECT id, lease_holder, lease_user_id, lease_session_id, lease_epoch, lease_acquired_at, lease_renewed_at,
            lease_expires_at, lease_ttl_seconds, lease_hold_until, lease_id
        FROM items
        WHERE lease_holder IS NOT NULL AND lease_expires_at <= now()
        ORDER BY lease_expires_at LIMIT 500
        FOR UPDATE SKIP LOCKED
    )
    UPDATE items i SET lease_holder = NULL, lease_user_id = NULL, lease_session_id = NULL,
        lease_acquired_at = NULL, lease_renewed_at = NULL, lease_expires_at = NULL, lease_ttl_seconds = NULL, lease_hold_until = NULL,
        lease_expiries = i.lease_expiries + 1, ",
    expired_as_last!("i."),
    "
    FROM expired e, workspaces w
    WHERE i.id = e.id AND w.id = i.workspace_id
    RETURNING i.id, i.workspace_id, w.slug, i.prefix, i.number, e.lease_holder, e.lease_user_id, e.lease_session_id,
        e.lease_epoch, e.lease_acquired_at, e.lease_renewed_at, e.lease_expires_at, e.lease_ttl_seconds, e.lease_hold_until, e.lease_id,
        i.lease_expiries, i.labels, w.quarantine_after_expiries, now() AS db_now"
);
