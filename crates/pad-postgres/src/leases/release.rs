//! The release statement (L6, L7, L14, L18).

/// L6/L7 in one statement: clears a live lease that is ours (and has the
/// given epoch and lease id, if given), or any live lease when forced. The
/// ended lease becomes the last lease, released or broken (L18). The epoch
/// counter stays. A break also records who broke it and why (`broken.rs`);
/// a release after success (L14) also records the success. The end's event
/// (`lease.released` or `lease.broken`, with its webhook deliveries) is
/// appended here, its data returned as `event_data` for the caller to
/// compare with `shared::event::ended`. A lease granted before lease ids
/// existed has none, which the rules read as 0, as here. $4 user, $5 holder, $6 epoch or
/// NULL, $7 force, $8 lease id or NULL, $9 reason, $10 succeeded, $11 the
/// item's ref, $12 `lease.released`, $13 `lease.broken`.
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
            last_lease_note = CASE WHEN d.lease_note_lease_id = d.lease_id THEN d.lease_note END, ",
    recorded_break!("d.ours", "COALESCE(d.lease_id, 0)", "$9::text", "$4"),
    ",
            last_success_at = CASE WHEN d.ours AND $10 THEN d.db_now ELSE i.last_success_at END,
            retry_at = CASE WHEN d.ours AND $10 THEN NULL ELSE i.retry_at END,
            lease_note = CASE WHEN d.ours AND $10 THEN NULL ELSE i.lease_note END,
            lease_note_holder = CASE WHEN d.ours AND $10 THEN NULL ELSE i.lease_note_holder END,
            lease_note_lease_id = CASE WHEN d.ours AND $10 THEN NULL ELSE i.lease_note_lease_id END
        FROM d
        WHERE i.id = d.id AND d.lease_holder IS NOT NULL AND d.lease_expires_at > d.db_now
          AND ($7 OR d.ours)
        RETURNING i.id
    ),
    ended AS (
        SELECT CASE WHEN d.ours THEN $12 ELSE $13 END AS type, d.db_now AS at,
            jsonb_build_object('holder', d.lease_holder, 'epoch', d.lease_epoch, 'lease_id', COALESCE(d.lease_id, 0),
                'reason', $9::text, 'ended', CASE WHEN d.ours THEN 'released' ELSE 'broken' END) AS data
        FROM upd, d
    ),
    ",
    event_slot!(),
    ",
    ev AS (
        INSERT INTO events (id, workspace_id, type, item_ref, actor_id, at, data)
        SELECT slot.base + slot.n, $1, ended.type, $11, $4, ended.at, ended.data FROM slot, ended WHERE slot.n < 65536
        RETURNING id, workspace_id, type
    ),
    ",
    enqueue_events!(),
    "
    SELECT d.*, upd.id IS NOT NULL AS cleared, (SELECT data FROM ended) AS event_data,
        (SELECT count(*) FROM ev) AS events_written
    FROM d LEFT JOIN upd ON true"
);
