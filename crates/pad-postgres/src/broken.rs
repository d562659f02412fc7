//! A broken lease's reason and breaker, recorded with the break so its
//! holder can be told (docs/leases.md L7, L18, "Told why"; the telling is
//! `pad_store::steps::explain_lost`). Written by the release statement that
//! breaks the lease (`leases/release.rs`), under the item's row lock.

/// L7: the `SET` list of a break, over the row `i` being released, where
/// `$ours` says the lease was released by its holder (nothing recorded) and
/// `$reason` and `$by` (a user id) are the break's. Kept with the break and
/// keyed by the lease id (`$lease_id`, the lease ended), so the endings that
/// follow need not clear them: they describe the last lease only while it
/// is that lease.
macro_rules! recorded_break {
    ($ours:literal, $lease_id:literal, $reason:literal, $by:literal) => {
        concat!(
            "broken_lease_id = CASE WHEN ",
            $ours,
            " THEN i.broken_lease_id ELSE ",
            $lease_id,
            " END,
            broken_reason = CASE WHEN ",
            $ours,
            " THEN i.broken_reason ELSE ",
            $reason,
            " END,
            broken_by = CASE WHEN ",
            $ours,
            " THEN i.broken_by ELSE (SELECT email FROM users WHERE id = ",
            $by,
            ") END"
        )
    };
}
