//! The renew statement (L4, L17, L19).

/// L4 in one statement: extends only a live lease with this epoch and/or
/// lease id (L17), holder and user. $4 user, $5 holder, $6 epoch or NULL, $7
/// ttl seconds or NULL (keep), $8 note, $9 lease id or NULL.
pub(super) const RENEW: &str = concat!(
    locked_item!(),
    ",
    upd AS (
        UPDATE items i SET
            lease_renewed_at = cur.db_now,
            lease_ttl_seconds = COALESCE($7, cur.lease_ttl_seconds),
            -- L19: never past the cap.
            lease_expires_at = LEAST(cur.db_now + COALESCE($7, cur.lease_ttl_seconds) * interval '1 second',
                cur.lease_hold_until),
            lease_note = COALESCE($8, i.lease_note),
            lease_note_holder = CASE WHEN $8 IS NULL THEN i.lease_note_holder ELSE i.lease_holder END,
            lease_note_lease_id = CASE WHEN $8 IS NULL THEN i.lease_note_lease_id ELSE i.lease_id END
        FROM cur
        WHERE i.id = cur.id AND cur.deleted_at IS NULL
          AND cur.lease_holder IS NOT NULL AND cur.lease_expires_at > cur.db_now
          AND ($6::bigint IS NULL OR cur.lease_epoch = $6) AND ($9::bigint IS NULL OR cur.lease_id = $9)
          AND cur.lease_user_id = $4 AND cur.lease_holder = $5
        ",
    returning_lease!(),
    "
    )
    SELECT cur.*, upd.* FROM cur LEFT JOIN upd ON true"
);
