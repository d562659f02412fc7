//! The release statement (L6, L7, L18).

/// L6/L7 in one statement: clears a live lease that is ours (and has the
/// given epoch and lease id, if given), or any live lease when forced. The
/// ended lease becomes the last lease, released or broken (L18). The epoch
/// counter stays. $4 user, $5 holder, $6 epoch or NULL, $7 force, $8 lease id or NULL.
pub(super) const RELEASE: &str = concat!(
    locked_item!(),
    ",
    d AS MATERIALIZED (
        SELECT cur.*, (cur.lease_user_id = $4 AND cur.lease_holder = $5
            AND ($6::bigint IS NULL OR cur.lease_epoch = $6) AND ($8::bigint IS NULL OR cur.lease_id = $8)) AS ours
        FROM cur
    ),
    upd AS (
        UPDATE items i SET lease_holder = NULL, lease_user_id = NULL, lease_session_id = NULL,
            lease_acquired_at = NULL, lease_renewed_at = NULL, lease_expires_at = NULL, lease_ttl_seconds = NULL, lease_hold_until = NULL,
            last_lease_id = d.lease_id, last_lease_epoch = d.lease_epoch, last_lease_holder = d.lease_holder,
            last_lease_session_id = d.lease_session_id, last_lease_acquired_at = d.lease_acquired_at,
            last_lease_ended_at = d.db_now,
            last_lease_ended = CASE WHEN d.ours THEN 'released' ELSE 'broken' END,
            last_lease_note = CASE WHEN d.lease_note_lease_id = d.lease_id THEN d.lease_note END
        FROM d
        WHERE i.id = d.id AND d.lease_holder IS NOT NULL AND d.lease_expires_at > d.db_now
          AND ($7 OR d.ours)
        RETURNING i.id
    )
    SELECT d.*, upd.id IS NOT NULL AS cleared FROM d LEFT JOIN upd ON true"
);
