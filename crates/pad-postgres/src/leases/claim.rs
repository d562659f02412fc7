//! The claim statement (L1-L3, L12, L13), plain and for a row this
//! transaction has already locked.

/// L1-L3, L12, L13 in one statement. Writes when there is no live lease
/// (grant: next epoch, `acquired_at = now`) or it is the claimant's own
/// (refresh: epoch and `acquired_at` kept; only if $9 allows it, L17). A grant
/// takes the next lease id and, over an expired lease, records that lease as
/// the last one (L18). $4 user, $5 holder, $6 session, $7 ttl seconds, $8 note,
/// $9 refresh, $10 `lease.claimed`, $11 the item's ref, $12 max hold seconds
/// or NULL (L19). A grant that records
/// no expiry also appends `lease.claimed` (with its webhook deliveries; an
/// expiry's events must come first, so then the caller appends it), its
/// data built here and returned as `claimed_data` for the caller to compare
/// with `shared::event::claimed`. The locked row's columns are named `prev_*` (read with
/// [`rows::locked_as`]); what the statement wrote has the plain names
/// (`lease_*`, empty when it wrote nothing) and `new_*` ([`returning_lease!`]).
macro_rules! claim_statement {
    ($guard:literal) => {
        concat!(
    locked_item!(),
    ",
    d AS MATERIALIZED (
        SELECT cur.*,
            (cur.lease_holder IS NOT NULL AND cur.lease_expires_at > cur.db_now) AS live,
            (cur.lease_user_id = $4 AND cur.lease_holder = $5 AND cur.lease_session_id IS NOT DISTINCT FROM $6) AS mine,
            (cur.lease_holder IS NOT NULL AND cur.lease_expires_at <= cur.db_now) AS expired_prev,
            CASE WHEN cur.lease_holder IS NULL OR cur.lease_expires_at <= cur.db_now
                THEN nextval('lease_ids') END AS grant_lease_id
        FROM cur
    ),
    upd AS (
        UPDATE items i SET
            lease_holder = $5, lease_user_id = $4, lease_session_id = $6,
            lease_id = COALESCE(d.grant_lease_id, d.lease_id),
            lease_note_lease_id = CASE WHEN $8::text IS NULL THEN i.lease_note_lease_id
                ELSE COALESCE(d.grant_lease_id, d.lease_id) END,
            last_lease_id = CASE WHEN d.expired_prev THEN d.lease_id ELSE i.last_lease_id END,
            last_lease_epoch = CASE WHEN d.expired_prev THEN d.lease_epoch ELSE i.last_lease_epoch END,
            last_lease_holder = CASE WHEN d.expired_prev THEN d.lease_holder ELSE i.last_lease_holder END,
            last_lease_session_id = CASE WHEN d.expired_prev THEN d.lease_session_id ELSE i.last_lease_session_id END,
            last_lease_acquired_at = CASE WHEN d.expired_prev THEN d.lease_acquired_at ELSE i.last_lease_acquired_at END,
            last_lease_ended_at = CASE WHEN d.expired_prev THEN d.lease_expires_at ELSE i.last_lease_ended_at END,
            last_lease_ended = CASE WHEN d.expired_prev THEN 'expired' ELSE i.last_lease_ended END,
            last_lease_note = CASE WHEN d.expired_prev
                THEN CASE WHEN d.lease_note_lease_id = d.lease_id THEN d.lease_note END
                ELSE i.last_lease_note END,
            lease_epoch = CASE WHEN d.live THEN d.lease_epoch ELSE d.lease_epoch + 1 END,
            lease_acquired_at = CASE WHEN d.live THEN d.lease_acquired_at ELSE d.db_now END,
            lease_renewed_at = d.db_now,
            -- L19: a refresh keeps its cap; a grant's starts now. LEAST skips NULL (no cap).
            lease_hold_until = CASE WHEN d.live THEN d.lease_hold_until
                ELSE d.db_now + $12 * interval '1 second' END,
            lease_expires_at = LEAST(d.db_now + $7 * interval '1 second',
                CASE WHEN d.live THEN d.lease_hold_until ELSE d.db_now + $12 * interval '1 second' END),
            lease_ttl_seconds = $7,
            lease_expiries = i.lease_expiries + CASE WHEN d.lease_holder IS NOT NULL AND NOT d.live THEN 1 ELSE 0 END,
            lease_note = COALESCE($8::text, i.lease_note),
            lease_note_holder = CASE WHEN $8::text IS NULL THEN i.lease_note_holder ELSE $5 END
        FROM d
        WHERE i.id = d.id AND d.deleted_at IS NULL AND (NOT d.live OR (d.mine AND $9))",
    $guard,
    "
        ",
    returning_lease!(),
    ", i.lease_expiries AS new_expiries, i.labels AS new_labels, i.*
    ),
    claimed AS (
        SELECT jsonb_build_object('holder', upd.lease_holder, 'session_id', upd.lease_session_id,
            'epoch', upd.lease_epoch, 'lease_id', upd.lease_id, 'expires_at', ",
    json_time!("upd.lease_expires_at"),
    ") AS data
        FROM upd, d WHERE NOT d.live AND NOT d.expired_prev
    ),
    ",
    event_slot!(),
    ",
    ev AS (
        INSERT INTO events (id, workspace_id, type, item_ref, actor_id, at, data)
        SELECT slot.base + slot.n, $1, $10, $11, $4, d.db_now, claimed.data FROM slot, claimed, d WHERE slot.n < 65536
        RETURNING id, workspace_id, type
    ),
    ",
    enqueue_events!(),
    "
    SELECT d.id AS prev_id, d.deleted_at AS prev_deleted_at, d.db_now,
        d.lease_holder AS prev_lease_holder, d.lease_user_id AS prev_lease_user_id,
        d.lease_session_id AS prev_lease_session_id, d.lease_epoch AS prev_lease_epoch,
        d.lease_acquired_at AS prev_lease_acquired_at, d.lease_renewed_at AS prev_lease_renewed_at,
        d.lease_expires_at AS prev_lease_expires_at, d.lease_ttl_seconds AS prev_lease_ttl_seconds, d.lease_hold_until AS prev_lease_hold_until,
        d.lease_id AS prev_lease_id, d.lease_note AS prev_lease_note, d.lease_note_holder AS prev_lease_note_holder,
        (SELECT data FROM claimed) AS claimed_data, (SELECT count(*) FROM ev) AS claimed_events, upd.*"
        )
    };
}

/// A claim: see [`claim_statement!`].
pub(super) const CLAIM: &str = concat!(claim_statement!(""), " FROM d LEFT JOIN upd ON true");

/// A claim run alone, outside a transaction (docs/leases.md, "A claim in
/// one statement"): as [`CLAIM`], but it writes nothing over an expired
/// lease, whose expiry needs more writes than this statement makes; the
/// caller then claims again in a transaction.
pub(super) const CLAIM_ALONE: &str =
    concat!(claim_statement!(" AND NOT d.expired_prev"), " FROM d LEFT JOIN upd ON true");

/// A claim of a row this transaction had already locked (a claim-next
/// candidate), which also reads the item as the grant left it: the
/// statement's snapshot was taken under the lock, so nothing it joins can
/// have changed since, and the flow's reload of the item needs no round trip.
pub(super) const CLAIM_LOADED: &str =
    concat!(claim_statement!(""), ", ", item_joined_columns!("upd"), " FROM d LEFT JOIN upd ON true");

/// A claim's look before it waits for the row lock (docs/leases.md, "A
/// refusal does not queue"): the row as last committed, read on the
/// database clock, without a lock.
pub(crate) const PEEK: &str = concat!(
    "SELECT ",
    lease_row!(),
    ", clock_timestamp() AS db_now FROM items WHERE workspace_id = $1 AND prefix = $2 AND number = $3"
);

/// Claim-next's statement up to the frontier (docs/leases.md, "Claim-next
/// in one statement"), after `WITH ` (or [`CLAIM_CANDIDATES_H`]): the
/// claimant's terms as the CTE `p` (bound by the caller in this order:
/// user, holder, session, ttl seconds, note, max hold seconds or NULL,
/// workspace, `lease.claimed`), then the candidates' SELECT, to which the
/// caller appends the frontier's predicate, order and limit, and then
/// [`CLAIM_CANDIDATES_TAIL`].
pub(super) const CLAIM_CANDIDATES_P: [&str; 9] = [
    "p AS MATERIALIZED (SELECT ",
    "::bigint AS user_id, ",
    "::text AS holder, ",
    "::text AS session_id, ",
    "::integer AS ttl, ",
    "::text AS note, ",
    "::integer AS max_hold, ",
    "::bigint AS ws_id, ",
    "::text AS claimed_type),
    cand AS MATERIALIZED (
        SELECT i.id, i.prefix, i.number, i.priority, i.created_at, i.lease_holder, i.lease_user_id,
            i.lease_session_id, i.lease_epoch, i.lease_acquired_at, i.lease_renewed_at, i.lease_expires_at,
            i.lease_ttl_seconds, i.lease_hold_until, i.lease_id, i.lease_note, i.lease_note_holder
        FROM items i",
];

/// Claim-next's statement after the frontier: every candidate is locked
/// (`SKIP LOCKED`: rows another transaction holds are passed over) and read
/// with the clock taken after the locks; those with no lease are granted as
/// [`CLAIM`] grants one (next epoch, a new lease id, `acquired_at` = now,
/// L19's cap), each with its `lease.claimed` (data returned as
/// `claimed_data` to compare with `shared::event::claimed`) and webhook
/// deliveries, their events in frontier order. Those with an expired lease
/// are returned unwritten, for the flow to record the expiry first (and,
/// by the guard of [`CLAIM_CANDIDATES_TAIL`], the free ones after them). One row
/// per candidate, in frontier order: `prev_*` the row as locked, `rank`,
/// `db_now`, and for a grant `new_*` ([`returning_lease!`]) and the item as
/// left with its joined columns, read in the statement's snapshot.
macro_rules! claim_candidates_tail {
    ($guard:expr) => {
        claim_candidates_tail!($guard, "p.holder", "", "")
    };
    ($guard:expr, $holder:literal, $from:literal, $where:literal) => {
        concat!(
    " FOR UPDATE OF i SKIP LOCKED
    ),
    ranked AS MATERIALIZED (
        SELECT cand.*, row_number() OVER (ORDER BY ",
    frontier_order!("cand"),
    ") AS rank,
            clock_timestamp() AS db_now,
            CASE WHEN cand.lease_holder IS NULL THEN nextval('lease_ids') END AS grant_lease_id
        FROM cand
    ),
    upd AS (
        UPDATE items i SET
            lease_holder = ",
    $holder,
    ", lease_user_id = p.user_id, lease_session_id = p.session_id,
            lease_id = r.grant_lease_id,
            lease_note_lease_id = CASE WHEN p.note IS NULL THEN i.lease_note_lease_id ELSE r.grant_lease_id END,
            lease_epoch = i.lease_epoch + 1,
            lease_acquired_at = r.db_now,
            lease_renewed_at = r.db_now,
            lease_hold_until = r.db_now + p.max_hold * interval '1 second',
            -- LEAST skips NULL (no cap).
            lease_expires_at = LEAST(r.db_now + p.ttl * interval '1 second', r.db_now + p.max_hold * interval '1 second'),
            lease_ttl_seconds = p.ttl,
            lease_note = COALESCE(p.note, i.lease_note),
            lease_note_holder = CASE WHEN p.note IS NULL THEN i.lease_note_holder ELSE ",
    $holder,
    " END
        FROM ranked r, p",
    $from,
    "
        WHERE i.id = r.id AND r.grant_lease_id IS NOT NULL",
    $where,
    $guard,
    "
        ",
    returning_lease!(),
    ", i.*
    ),
    claimed AS (
        SELECT upd.id, r.rank, r.db_now, upd.prefix || '-' || upd.number AS item_ref,
            jsonb_build_object('holder', upd.lease_holder, 'session_id', upd.lease_session_id,
                'epoch', upd.lease_epoch, 'lease_id', upd.lease_id, 'expires_at', ",
    json_time!("upd.lease_expires_at"),
    ") AS data
        FROM upd JOIN ranked r ON r.id = upd.id
    ),
    ",
    event_slot!(),
    ",
    ev AS (
        INSERT INTO events (id, workspace_id, type, item_ref, actor_id, at, data)
        SELECT slot.base + slot.n + c.k, p.ws_id, p.claimed_type, c.item_ref, p.user_id, c.db_now, c.data
        FROM slot, p, (SELECT claimed.*, row_number() OVER (ORDER BY claimed.rank) - 1 AS k FROM claimed) c
        WHERE slot.n + c.k < 65536
        RETURNING id, workspace_id, type
    ),
    ",
    enqueue_events!(),
    "
    SELECT r.rank, r.db_now, r.id AS prev_id, NULL::timestamptz AS prev_deleted_at, r.prefix AS cand_prefix,
        r.number AS cand_number, r.lease_holder AS prev_lease_holder, r.lease_user_id AS prev_lease_user_id,
        r.lease_session_id AS prev_lease_session_id, r.lease_epoch AS prev_lease_epoch,
        r.lease_acquired_at AS prev_lease_acquired_at, r.lease_renewed_at AS prev_lease_renewed_at,
        r.lease_expires_at AS prev_lease_expires_at, r.lease_ttl_seconds AS prev_lease_ttl_seconds,
        r.lease_hold_until AS prev_lease_hold_until, r.lease_id AS prev_lease_id,
        r.lease_note AS prev_lease_note, r.lease_note_holder AS prev_lease_note_holder,
        cl.data AS claimed_data, (SELECT count(*) FROM ev) AS claimed_events, upd.*, ",
    item_joined_columns!("upd"),
    "
    FROM ranked r LEFT JOIN upd ON upd.id = r.id LEFT JOIN claimed cl ON cl.id = r.id ORDER BY r.rank"
        )
    };
}

/// The guard of a claim-next statement that cannot record an expiry: it
/// grants nothing when any candidate it locked holds an expired lease.
macro_rules! none_expired {
    () => {
        " AND NOT EXISTS (SELECT FROM ranked x WHERE x.lease_holder IS NOT NULL)"
    };
}

/// Claim-next's statement after the frontier, in a transaction: see
/// [`claim_candidates_tail!`]. It grants only the candidates ranked before
/// the first whose lease has expired: the flow records that expiry and
/// claims it, then claims the ones after it one by one, so the grants and
/// their events keep frontier order, as if each were made alone
/// (docs/leases.md, "Claim-next in one statement").
pub(super) const CLAIM_CANDIDATES_TAIL: &str = claim_candidates_tail!(
    " AND NOT EXISTS (SELECT FROM ranked x WHERE x.lease_holder IS NOT NULL AND x.rank < r.rank)"
);

/// Claim-next's statement after the frontier, sent without a transaction
/// (docs/leases.md, "Claim-next in one statement"): as
/// [`CLAIM_CANDIDATES_TAIL`], but when any candidate's lease has expired it
/// grants nothing, since recording an expiry takes more writes than this
/// statement makes; the caller then claims in a transaction.
pub(super) const CLAIM_CANDIDATES_TAIL_ALONE: &str = claim_candidates_tail!(none_expired!());

/// The holders of claim-nexts made together (docs/leases.md, "Claim-nexts
/// made together"), before [`CLAIM_CANDIDATES_P`]: the array bound between
/// the two pieces becomes the CTE `h`, one row per claimant in the batch's
/// order (`k` from 1), whose terms are otherwise the same.
pub(super) const CLAIM_CANDIDATES_H: [&str; 2] =
    ["WITH h AS MATERIALIZED (SELECT holder, k FROM unnest(", "::text[]) WITH ORDINALITY AS h (holder, k)), "];

/// Claim-next's statement after the frontier for claim-nexts made together:
/// the candidate ranked `k` goes to the claimant `k` of `h`. As
/// [`CLAIM_CANDIDATES_TAIL_ALONE`], it grants nothing when a candidate's
/// lease has expired: the calls are then made one by one.
pub(super) const CLAIM_CANDIDATES_TAIL_TOGETHER: &str =
    claim_candidates_tail!(none_expired!(), "h.holder", ", h", " AND h.k = r.rank");
