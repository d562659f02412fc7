//! Leases: the lease statements' reading through the rules
//! (docs/leases.md), and the lease steps of the shared flows
//! (`pad_store::steps`). The statements themselves are in `leases/`, one
//! file per verb; the `SET` lists and `RETURNING` they share are the
//! macros here.

use async_trait::async_trait;
use pad_core::lease::{self, ClaimDecision, LeaseEnd, LeaseHandle, ReleaseDecision, RenewDecision, Terms, Ttl};
use pad_core::{
    EventKind, FrontierFilter, Item, ItemRef, LIST_LIMIT_MAX, Lease, Status, Timestamp, ValidFrontierFilter, Workspace,
};
use pad_store::steps::{self, Candidate, Claimed, EventSteps, Expiry, LeaseSteps, WriteTx};
use pad_store::{
    ClaimOutcome, ClaimRequest, ClaimedNext, CompleteRequest, FailOutcome, FailRequest, LeaseOps, NextClaim,
    ReleaseOutcome, ReleaseRequest, RenewRequest, StoreError, StoreResult, shared,
};
use serde_json::Value;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;
use sqlx::{PgConnection, PgPool, Postgres, QueryBuilder, Row};

use crate::group::{self, Call};
use crate::items::push_parent;
use crate::rows::{self, ITEM_SELECT, item_from_row};
use crate::{PgStore, Tx, db};

/// TTLs are bounded to a day (L8), so they always fit the `integer` column.
fn ttl_param(ttl: Ttl) -> i32 {
    i32::try_from(ttl.seconds()).expect("L8 bounds TTLs to 86400 seconds")
}

/// The lease a lease statement wrote, read back by [`rows::written_lease`].
macro_rules! returning_lease {
    () => {
        "RETURNING i.lease_holder AS new_holder, i.lease_user_id AS new_user_id, i.lease_session_id AS new_session_id,
                   i.lease_epoch AS new_epoch, i.lease_acquired_at AS new_acquired_at,
                   i.lease_renewed_at AS new_renewed_at, i.lease_expires_at AS new_expires_at,
                   i.lease_ttl_seconds AS new_ttl_seconds, i.lease_hold_until AS new_hold_until, i.lease_id AS new_lease_id"
    };
}

/// L18: the `SET` list that makes the lease in a row's `lease_*` columns
/// (as they were before the statement) its last lease, ended by expiry at
/// its `expires_at`. `$p` prefixes the old columns.
macro_rules! expired_as_last {
    ($p:literal) => {
        concat!(
            "last_lease_id = ",
            $p,
            "lease_id, last_lease_epoch = ",
            $p,
            "lease_epoch, ",
            "last_lease_holder = ",
            $p,
            "lease_holder, last_lease_session_id = ",
            $p,
            "lease_session_id, ",
            "last_lease_acquired_at = ",
            $p,
            "lease_acquired_at, last_lease_ended_at = ",
            $p,
            "lease_expires_at, ",
            "last_lease_ended = 'expired', ",
            "last_lease_note = CASE WHEN ",
            $p,
            "lease_note_lease_id = ",
            $p,
            "lease_id THEN ",
            $p,
            "lease_note END"
        )
    };
}

/// A timestamp in JSON as serde writes a `chrono::DateTime<Utc>`: RFC 3339
/// in UTC with `Z`, and the fewest of 0, 3 or 6 fractional digits that keep
/// it exact. Only for JSON whose Rust encoding the caller compares it with.
macro_rules! json_time {
    ($t:literal) => {
        concat!(
            "(to_char(",
            $t,
            " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') || CASE
                WHEN extract(microseconds FROM ",
            $t,
            " AT TIME ZONE 'UTC')::bigint % 1000000 = 0 THEN ''
                WHEN extract(microseconds FROM ",
            $t,
            " AT TIME ZONE 'UTC')::bigint % 1000 = 0 THEN to_char(",
            $t,
            " AT TIME ZONE 'UTC', '.MS')
                ELSE to_char(",
            $t,
            " AT TIME ZONE 'UTC', '.US') END || 'Z')"
        )
    };
}

/// L18: the `SET` list that ends a row's live lease at `$at` (a parameter),
/// ended `$how` (a parameter); it becomes the last lease.
macro_rules! ended_lease {
    ($at:literal, $how:literal) => {
        concat!(
            "last_lease_id = lease_id, last_lease_epoch = lease_epoch, last_lease_holder = lease_holder,
            last_lease_session_id = lease_session_id, last_lease_acquired_at = lease_acquired_at,
            last_lease_ended_at = ",
            $at,
            ", last_lease_ended = ",
            $how,
            ",
            last_lease_note = CASE WHEN lease_note_lease_id = lease_id THEN lease_note END,
            lease_holder = NULL, lease_user_id = NULL, lease_session_id = NULL, lease_acquired_at = NULL,
            lease_renewed_at = NULL, lease_expires_at = NULL, lease_ttl_seconds = NULL, lease_hold_until = NULL"
        )
    };
}

/// The frontier's order (L11), best first, over the items row `$i`: the
/// one home of it for `push_frontier` and for claim-next's statement, which
/// ranks its locked candidates again in it (a locking SELECT cannot number
/// its rows).
macro_rules! frontier_order {
    ($i:literal) => {
        concat!($i, ".priority DESC, ", $i, ".created_at, ", $i, ".id")
    };
}

mod claim;
mod complete;
mod expire;
mod release;
mod renew;

pub(crate) use claim::PEEK;
use claim::{
    CLAIM, CLAIM_ALONE, CLAIM_CANDIDATES_H, CLAIM_CANDIDATES_P, CLAIM_CANDIDATES_TAIL, CLAIM_CANDIDATES_TAIL_ALONE,
    CLAIM_CANDIDATES_TAIL_TOGETHER, CLAIM_LOADED,
};
use complete::{COMPLETE, COMPLETE_ONE, LOCK_FOR_COMPLETE};
use expire::{EXPIRE, OBSERVE_EXPIRED};
use release::RELEASE;
use renew::RENEW;

/// The SQL predicate and `pad_core::lease` are two encodings of one rule: the
/// statement decides atomically, the rule says what the answer means. If they
/// ever disagree the error drops the transaction, so it rolls back.
fn agree(wrote: Option<&Lease>, decided: Option<&Lease>) -> StoreResult<()> {
    if wrote == decided { Ok(()) } else { Err(disagree(wrote, decided)) }
}

fn disagree(wrote: impl std::fmt::Debug, decided: impl std::fmt::Debug) -> StoreError {
    StoreError::Internal(format!("lease statement and lease rule disagree: wrote {wrote:?}, rule decided {decided:?}"))
}

/// A lease statement with the arguments the claim, renew and release
/// statements start with: $1 workspace, $2 prefix, $3 number (the item),
/// $4 user and $5 holder (the claimant).
fn by_claimant<'q>(
    sql: &'static str, ws: &Workspace, r: &'q ItemRef, user: i64, holder: &'q str,
) -> Query<'q, Postgres, PgArguments> {
    sqlx::query(sql).bind(ws.id).bind(&r.prefix).bind(r.number).bind(user).bind(holder)
}

/// A renew the statement refused because the caller's lease is gone (L7):
/// the refusal still to be explained from the item's last lease.
struct Lost {
    item: i64,
    error: StoreError,
}

/// L4 as one statement on `conn`, in a transaction or alone: it commits or
/// writes nothing either way.
async fn renew_statement(
    conn: &mut PgConnection, ws: &Workspace, r: &ItemRef, req: &RenewRequest,
) -> StoreResult<Result<Lease, Lost>> {
    let ttl = req.validate(&ws.settings)?;
    let claimant = req.claimant();
    let row = by_claimant(RENEW, ws, r, req.actor.user_id, &req.holder)
        .bind(req.handle.epoch)
        .bind(ttl.map(ttl_param))
        .bind(&req.note)
        .bind(req.handle.lease_id)
        .fetch_optional(conn)
        .await
        .map_err(db)?;
    let locked = rows::locked(row.as_ref(), r)?.undeleted(r)?;
    let wrote = rows::written_lease(row.as_ref().expect("rows::locked refuses a missing row"))?;
    let now = locked.now;
    match lease::decide_renew(&locked.slot, &claimant, req.handle, ttl, now) {
        RenewDecision::Renewed(l) => {
            agree(wrote.as_ref(), Some(&l))?;
            Ok(Ok(l))
        }
        RenewDecision::Lost(live) => {
            agree(wrote.as_ref(), None)?;
            Ok(Err(Lost { item: locked.id, error: StoreError::lost(live, now) }))
        }
        RenewDecision::Held(l) => {
            agree(wrote.as_ref(), None)?;
            Err(StoreError::held(l, now))
        }
    }
}

/// A renew with no other lease call to share a transaction with: its one
/// statement alone, without `BEGIN` and `COMMIT` (what a lone heartbeat
/// costs); only a refusal to explain opens a read transaction. Alone, a
/// statement that disagreed with the rule ([`agree`]) has already committed:
/// the error is still answered, as before the group existed.
pub(crate) async fn renew_alone(pool: &PgPool, ws: &Workspace, r: &ItemRef, req: &RenewRequest) -> StoreResult<Lease> {
    let mut conn = pool.acquire().await.map_err(db)?;
    match renew_statement(&mut conn, ws, r, req).await? {
        Ok(lease) => Ok(lease),
        Err(Lost { item, error }) => {
            drop(conn);
            let mut tx = Tx::begin_on(pool).await?;
            let error = steps::explain_lost(&mut tx, item, req.handle, error).await;
            tx.rollback().await?;
            Err(error)
        }
    }
}

/// A release that found the lease expired but not yet recorded: the expiry
/// is still to be recorded (L5, L13), which the statement does not do.
struct Unrecorded {
    item: i64,
    lease: Lease,
    now: Timestamp,
}

/// L6, L7, L14, L18 as one statement on `conn` ([`RELEASE`]), in a
/// transaction or alone, read through `decide_release`: the end it wrote
/// with its event, a refusal as the error, or an expired lease it left
/// unrecorded.
async fn release_statement(
    conn: &mut PgConnection, ws: &Workspace, r: &ItemRef, req: &ReleaseRequest,
) -> StoreResult<Result<ReleaseOutcome, Unrecorded>> {
    req.validate()?;
    let claimant = req.claimant();
    let row = by_claimant(RELEASE, ws, r, req.actor.user_id, &req.holder)
        .bind(req.handle.epoch)
        .bind(req.force)
        .bind(req.handle.lease_id)
        .bind(&req.reason)
        .bind(req.succeeded)
        .bind(r.to_string())
        .bind(EventKind::LeaseReleased.as_str())
        .bind(EventKind::LeaseBroken.as_str())
        .fetch_optional(conn)
        .await
        .map_err(db)?;
    let locked = rows::locked(row.as_ref(), r)?;
    let row = row.expect("rows::locked refuses a missing row");
    let cleared: bool = row.get("cleared");
    let now = locked.now;
    let decision = lease::decide_release(&locked.slot, &claimant, req.handle, req.force, now);
    let ends = matches!(decision, ReleaseDecision::Released(_) | ReleaseDecision::Broken(_));
    if cleared != ends {
        return Err(disagree(cleared, &decision));
    }
    let (lease, kind) = match decision {
        ReleaseDecision::Released(l) => (l, LeaseEnd::Released),
        ReleaseDecision::Broken(l) => (l, LeaseEnd::Broken),
        ReleaseDecision::Held(l) => return Err(StoreError::held(l, now)),
        ReleaseDecision::Lost(l) => return Err(StoreError::lost(Some(l), now)),
        ReleaseDecision::NoLiveLease => {
            return Ok(match locked.slot.current {
                Some(lease) => Err(Unrecorded { item: locked.id, lease, now }),
                None => Ok(ReleaseOutcome::no_live_lease()),
            });
        }
    };
    let data = shared::event::ended(&lease, kind, req.reason.as_deref());
    let written: Option<Value> = row.get("event_data");
    if written.as_ref() != Some(&data) {
        return Err(disagree(written, data));
    }
    if row.get::<i64, _>("events_written") != 1 {
        return Err(crate::events::too_many_events());
    }
    Ok(Ok(ReleaseOutcome::ended(lease, kind, now)))
}

/// A release as one statement, without `BEGIN` and `COMMIT`
/// (docs/leases.md, "One call, one statement"). `None` when the lease had
/// expired unrecorded: the statement wrote nothing, and the release is made
/// again in a transaction, which records the expiry.
pub(crate) async fn release_alone(
    pool: &PgPool, ws: &Workspace, r: &ItemRef, req: &ReleaseRequest,
) -> StoreResult<Option<ReleaseOutcome>> {
    let mut conn = pool.acquire().await.map_err(db)?;
    Ok(release_statement(&mut conn, ws, r, req).await?.ok())
}

/// A claim statement's row read through `decide_claim`.
#[expect(clippy::large_enum_variant, reason = "one lives on the stack for one claim, then moves out")]
enum ClaimRow {
    /// The claim is decided and everything it writes is written (a grant
    /// over no expired lease, a refresh).
    Decided(Claimed),
    /// A grant over an expired lease (L5) that the statement wrote: the
    /// expiry and then `lease.claimed` are still to be written.
    OverExpired { outcome: ClaimOutcome, now: Timestamp, expiry: Expiry },
    /// [`CLAIM_ALONE`] only: a grant over an expired lease, which it left
    /// unwritten for a transaction to make.
    Expired,
}

/// Which claim statement runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ClaimHow {
    /// [`CLAIM`], in a transaction.
    Plain,
    /// [`CLAIM_LOADED`]: in a transaction that has locked the row already.
    Loaded,
    /// [`CLAIM_ALONE`]: without a transaction.
    Alone,
}

/// Runs a claim statement on `conn` and reads its row through
/// `decide_claim`: a refusal is the error.
async fn claim_statement(
    conn: &mut PgConnection, how: ClaimHow, ws: &Workspace, r: &ItemRef, req: &ClaimRequest, terms: Terms,
) -> StoreResult<ClaimRow> {
    let claimant = req.claimant();
    let sql = match how {
        ClaimHow::Plain => CLAIM,
        ClaimHow::Loaded => CLAIM_LOADED,
        ClaimHow::Alone => CLAIM_ALONE,
    };
    let row = by_claimant(sql, ws, r, req.actor.user_id, &req.holder)
        .bind(&req.session_id)
        .bind(ttl_param(terms.ttl))
        .bind(&req.note)
        .bind(req.refresh)
        .bind(EventKind::LeaseClaimed.as_str())
        .bind(r.to_string())
        .bind(terms.max_hold_seconds.map(|s| i32::try_from(s).unwrap_or(i32::MAX)))
        .fetch_optional(conn)
        .await
        .map_err(db)?;
    let locked = rows::locked_as(row.as_ref(), r, "prev_")?.undeleted(r)?;
    let row = row.expect("rows::locked refuses a missing row");
    let wrote = rows::written_lease(&row)?;
    let now = locked.now;
    let (expiries, labels): (Option<i64>, Option<Vec<String>>) = (row.get("new_expiries"), row.get("new_labels"));
    let (previous_note, previous_holder) = (row.get("prev_lease_note"), row.get("prev_lease_note_holder"));
    let claimed: (Option<Value>, i64) = (row.get("claimed_data"), row.get("claimed_events"));
    // `CLAIM_LOADED` started under this transaction's lock, so the item it
    // returned is current.
    let item = if how == ClaimHow::Loaded && wrote.is_some() { Some(item_from_row(&row, now)?) } else { None };
    // The statement allocated the grant's id; the rule is told it to compare.
    let grant_id = wrote.as_ref().map_or(0, |l| l.lease_id);
    match lease::decide_claim(&locked.slot, &claimant, terms, req.refresh, grant_id, now) {
        ClaimDecision::Held(l) => {
            agree(wrote.as_ref(), None)?;
            Err(StoreError::held(l, now))
        }
        ClaimDecision::Refresh(l) => {
            agree(wrote.as_ref(), Some(&l))?;
            if claimed.1 != 0 {
                return Err(disagree(claimed, "a refresh, which appends no event"));
            }
            let outcome = ClaimOutcome { lease: l, refreshed: true, previous_note: None, previous_holder: None };
            Ok(ClaimRow::Decided(Claimed { outcome, now, item }))
        }
        ClaimDecision::Grant { lease: _, previous_expired: true } if how == ClaimHow::Alone => {
            agree(wrote.as_ref(), None)?;
            Ok(ClaimRow::Expired)
        }
        ClaimDecision::Grant { lease: l, previous_expired: true } => {
            agree(wrote.as_ref(), Some(&l))?;
            let expiry = Expiry {
                ws: ws.id,
                threshold: ws.settings.quarantine_after_expiries,
                item: locked.id,
                item_ref: r.clone(),
                lease: locked.slot.current.clone().expect("an expired lease was recorded"),
                expiries: expiries.ok_or_else(|| disagree("no expiry count", &l))?,
                labels: labels.unwrap_or_default(),
            };
            let outcome = ClaimOutcome { lease: l, refreshed: false, previous_note, previous_holder };
            Ok(ClaimRow::OverExpired { outcome, now, expiry })
        }
        ClaimDecision::Grant { lease: l, previous_expired: false } => {
            agree(wrote.as_ref(), Some(&l))?;
            if claimed.1 != 1 {
                return Err(crate::events::too_many_events());
            }
            let outcome = fresh_grant(&row, l)?;
            Ok(ClaimRow::Decided(Claimed { outcome, now, item }))
        }
    }
}

/// A grant over no lease that a statement wrote with its `lease.claimed`
/// (`claimed_data`, which must be the rule's event), and the note the
/// previous holder left (`prev_lease_note`, L12).
fn fresh_grant(row: &PgRow, l: Lease) -> StoreResult<ClaimOutcome> {
    let data = shared::event::claimed(&l);
    let written: Option<Value> = row.get("claimed_data");
    if written.as_ref() != Some(&data) {
        return Err(disagree(written, data));
    }
    let (previous_note, previous_holder) = (row.get("prev_lease_note"), row.get("prev_lease_note_holder"));
    Ok(ClaimOutcome { lease: l, refreshed: false, previous_note, previous_holder })
}

/// A claim as one statement, without `BEGIN` and `COMMIT` (docs/leases.md,
/// "A claim in one statement"): what it decides is committed when it
/// answers. `None` when the item's lease had expired: that grant records
/// the expiry too, so it is made again in a transaction. Alone, a statement
/// that disagreed with the rule ([`agree`]) has already committed: the
/// error is still answered, as for a lone renew.
async fn claim_alone(
    pool: &PgPool, ws: &Workspace, r: &ItemRef, req: &ClaimRequest, terms: Terms,
) -> StoreResult<Option<ClaimOutcome>> {
    let mut conn = pool.acquire().await.map_err(db)?;
    match claim_statement(&mut conn, ClaimHow::Alone, ws, r, req, terms).await? {
        ClaimRow::Decided(claimed) => Ok(Some(claimed.outcome)),
        ClaimRow::Expired => Ok(None),
        ClaimRow::OverExpired { .. } => Err(disagree("a grant written alone", "nothing written")),
    }
}

/// How the candidates' statement is sent.
#[derive(Clone, Copy)]
enum Sent<'a> {
    /// In a transaction, which records an expired candidate's lease next.
    InTx,
    /// Without a transaction: it grants nothing beside an expired lease.
    Alone,
    /// For claim-nexts made together in a shared transaction, one item
    /// each, their terms the same but the holder (docs/leases.md,
    /// "Claim-nexts made together"): nothing beside an expired lease either.
    Together(&'a [&'a ClaimRequest]),
}

/// Claim-next's statement as [`candidates_statement`] sends it, its
/// parameters bound.
fn candidates_query(
    sent: &Sent<'_>, ws: &Workspace, f: &ValidFrontierFilter, limit: usize, req: &ClaimRequest, terms: Terms,
) -> QueryBuilder<Postgres> {
    let [head, user, holder, session, ttl, note, max_hold, ws_id, tail] = CLAIM_CANDIDATES_P;
    let mut qb = QueryBuilder::new("");
    if let Sent::Together(reqs) = sent {
        let [h, after_h] = CLAIM_CANDIDATES_H;
        qb.push(h).push_bind(reqs.iter().map(|r| r.holder.clone()).collect::<Vec<_>>()).push(after_h);
    } else {
        qb.push("WITH ");
    }
    qb.push(head);
    qb.push_bind(req.actor.user_id).push(user);
    qb.push_bind(req.holder.clone()).push(holder);
    qb.push_bind(req.session_id.clone()).push(session);
    qb.push_bind(ttl_param(terms.ttl)).push(ttl);
    qb.push_bind(req.note.clone()).push(note);
    qb.push_bind(terms.max_hold_seconds.map(|s| i32::try_from(s).unwrap_or(i32::MAX))).push(max_hold);
    qb.push_bind(ws.id).push(ws_id);
    qb.push_bind(EventKind::LeaseClaimed.as_str()).push(tail);
    push_frontier(&mut qb, ws, f, u32::try_from(limit).unwrap_or(u32::MAX));
    qb.push(match sent {
        Sent::InTx => CLAIM_CANDIDATES_TAIL,
        Sent::Alone => CLAIM_CANDIDATES_TAIL_ALONE,
        Sent::Together(_) => CLAIM_CANDIDATES_TAIL_TOGETHER,
    });
    qb
}

/// Claim-next's statement (docs/leases.md, "Claim-next in one statement"):
/// finds up to `limit` candidates, locks them and grants those with no
/// lease, each grant read through `decide_claim` for its claimant. How it
/// is sent: [`Sent`].
async fn candidates_statement(
    conn: &mut PgConnection, sent: Sent<'_>, ws: &Workspace, f: &ValidFrontierFilter, limit: usize, req: &ClaimRequest,
    terms: Terms,
) -> StoreResult<Vec<Candidate>> {
    // SKIP LOCKED: concurrent callers (on any instance) pass over rows
    // another is claiming instead of waiting for them; the re-check
    // after the lock drops rows claimed since this statement began.
    let rows = candidates_query(&sent, ws, f, limit, req, terms).build().fetch_all(&mut *conn).await.map_err(db)?;
    let mut candidates = Vec::with_capacity(rows.len());
    for row in &rows {
        let claimant = match sent {
            // The candidate ranked k went to the claimant k.
            Sent::Together(reqs) => usize::try_from(row.get::<i64, _>("rank") - 1)
                .ok()
                .and_then(|k| reqs.get(k))
                .ok_or_else(|| disagree("a candidate ranked past the claimants", reqs.len()))?
                .claimant(),
            Sent::InTx | Sent::Alone => req.claimant(),
        };
        let item_ref = ItemRef { prefix: row.get("cand_prefix"), number: row.get("cand_number") };
        let locked = rows::locked_as(Some(row), &item_ref, "prev_")?;
        let (id, now) = (locked.id, locked.now);
        let Some(wrote) = rows::written_lease(row)? else {
            // On the frontier, a recorded lease is an expired one.
            let expired = locked.slot.current;
            candidates.push(Candidate { id, item_ref, expired, now, granted: None });
            continue;
        };
        let ClaimDecision::Grant { lease: l, previous_expired: false } =
            lease::decide_claim(&locked.slot, &claimant, terms, req.refresh, wrote.lease_id, now)
        else {
            return Err(disagree(wrote, "no grant: the row had a lease"));
        };
        agree(Some(&wrote), Some(&l))?;
        let outcome = fresh_grant(row, l)?;
        let item = item_from_row(row, now)?;
        candidates.push(Candidate { id, item_ref, expired: None, now, granted: Some((item, outcome)) });
    }
    let grants = candidates.iter().filter(|c| c.granted.is_some()).count();
    if rows.first().map_or(0, |row| row.get::<i64, _>("claimed_events")) != grants as i64 {
        return Err(crate::events::too_many_events());
    }
    Ok(candidates)
}

/// Whether a statement guarded by `none_expired!` (sent alone or for
/// claim-nexts made together) met a candidate whose lease has expired: it
/// then granted nothing, and its calls are made in a transaction.
fn met_expired(candidates: &[Candidate]) -> StoreResult<bool> {
    if !candidates.iter().any(|c| c.expired.is_some()) {
        return Ok(false);
    }
    if candidates.iter().any(|c| c.granted.is_some()) {
        return Err(disagree("a grant beside an expired candidate", "nothing written"));
    }
    Ok(true)
}

/// Claim-next as one statement, without `BEGIN` and `COMMIT`
/// (docs/leases.md, "Claim-next in one statement"): what it grants is
/// committed when it answers. `None` when a candidate's lease had expired:
/// the statement then granted nothing, and the claim-next is made again in a
/// transaction, which records the expiry. As for a lone claim, a statement
/// that disagreed with the rule has already committed; the error is still
/// answered.
pub(crate) async fn claim_next_alone(
    pool: &PgPool, ws: &Workspace, filter: &FrontierFilter, req: &ClaimRequest, count: u32,
) -> StoreResult<Option<Vec<(Item, ClaimOutcome)>>> {
    let f = filter.validate()?;
    let terms = req.validate(&ws.settings)?;
    let want = usize::try_from(count).unwrap_or(usize::MAX).max(1);
    let mut conn = pool.acquire().await.map_err(db)?;
    let candidates = candidates_statement(&mut conn, Sent::Alone, ws, &f, want, req, terms).await?;
    if met_expired(&candidates)? {
        return Ok(None);
    }
    Ok(Some(candidates.into_iter().filter_map(|c| c.granted).collect()))
}

/// The lease calls that share a transaction (`group.rs`), each as it runs there.
impl Tx {
    pub(crate) async fn renew(&mut self, ws: &Workspace, r: &ItemRef, req: &RenewRequest) -> StoreResult<Lease> {
        match renew_statement(&mut self.conn, ws, r, req).await? {
            Ok(lease) => Ok(lease),
            // Told why (L7): how the caller's lease ended.
            Err(Lost { item, error }) => Err(steps::explain_lost(self, item, req.handle, error).await),
        }
    }

    pub(crate) async fn release(
        &mut self, ws: &Workspace, r: &ItemRef, req: &ReleaseRequest,
    ) -> StoreResult<ReleaseOutcome> {
        match release_statement(&mut self.conn, ws, r, req).await? {
            Ok(outcome) => Ok(outcome),
            // L5/L13: a recorded but expired lease is observed here, once.
            Err(Unrecorded { item, lease, now }) => {
                steps::expire(self, ws, item, r, lease, now).await?;
                Ok(ReleaseOutcome::no_live_lease())
            }
        }
    }

    /// Claim-nexts made together (docs/leases.md, "Claim-nexts made
    /// together"): one item each for `reqs`, whose terms are the same but
    /// the holder, found, locked and granted by one statement, the best item
    /// to the first claimant. Per claimant in `reqs`' order, its grant, or
    /// `None` when the statement found no item for it. `None` for them all
    /// when a candidate's lease had expired: nothing was granted, and the
    /// caller makes the claim-nexts one by one.
    pub(crate) async fn claim_next_together(
        &mut self, ws: &Workspace, filter: &FrontierFilter, reqs: &[&ClaimRequest],
    ) -> StoreResult<Option<Vec<Option<(Item, ClaimOutcome)>>>> {
        let Some(first) = reqs.first() else { return Ok(Some(Vec::new())) };
        let f = filter.validate()?;
        let terms = first.validate(&ws.settings)?;
        // The terms are the same, the holders are not: each is checked, so a
        // bad one fails the batch, which then answers each call alone.
        for req in &reqs[1..] {
            req.validate(&ws.settings)?;
        }
        let candidates =
            candidates_statement(&mut self.conn, Sent::Together(reqs), ws, &f, reqs.len(), first, terms).await?;
        for c in &candidates {
            self.hold(&c.item_ref);
        }
        if met_expired(&candidates)? {
            return Ok(None);
        }
        // In rank order, every one granted (none expired), the candidate
        // ranked k to the claimant k; those past the last found none.
        let mut grants: Vec<_> = candidates.into_iter().map(|c| c.granted).collect();
        grants.resize_with(reqs.len(), || None);
        Ok(Some(grants))
    }

    /// L15 as `pad_store::steps::complete` decides it, in two statements:
    /// the lock with the item, then every write with the item as left
    /// (docs/benchmarks.md, "Round trips on PostgreSQL").
    pub(crate) async fn complete(&mut self, ws: &Workspace, r: &ItemRef, req: &CompleteRequest) -> StoreResult<Item> {
        let mut items = self.complete_many(&[(ws, r, req)]).await?;
        Ok(items.pop().expect("one complete, one item"))
    }

    /// Completes of distinct items, in item order, as the two statements of
    /// one: one lock for them all, every rule decided on its own row, then
    /// one statement for every write (docs/leases.md, "Completes written
    /// together"). The items as left, in `calls`' order. Any refusal fails
    /// the lot: the caller rolls back (a shared transaction then runs each
    /// call alone, docs/leases.md, "Lease calls that share a transaction").
    pub(crate) async fn complete_many(
        &mut self, calls: &[(&Workspace, &ItemRef, &CompleteRequest)],
    ) -> StoreResult<Vec<Item>> {
        // The rows stay locked until commit, so the leases decided on are the ones ended.
        let rows = lock_for_complete(&mut self.conn, calls).await?;
        let writes = match decide_completes(calls, &rows)? {
            Ok(writes) => writes,
            Err(refused) => {
                return Err(steps::explain_lost(self, refused.item, refused.handle, refused.error).await);
            }
        };
        write_completes(&mut self.conn, writes).await
    }
}

/// A complete that the rule refused, for `explain_lost`.
struct RefusedEnd {
    item: i64,
    handle: LeaseHandle,
    error: StoreError,
}

/// Locks the rows `calls` complete ([`LOCK_FOR_COMPLETE`]): the checks
/// first, so a bad request locks nothing.
async fn lock_for_complete(
    conn: &mut PgConnection, calls: &[(&Workspace, &ItemRef, &CompleteRequest)],
) -> StoreResult<Vec<PgRow>> {
    for (_, _, req) in calls {
        req.validate()?;
    }
    sqlx::query(LOCK_FOR_COMPLETE)
        .bind(calls.iter().map(|(ws, _, _)| ws.id).collect::<Vec<_>>())
        .bind(calls.iter().map(|(_, r, _)| r.prefix.as_str()).collect::<Vec<_>>())
        .bind(calls.iter().map(|(_, r, _)| r.number).collect::<Vec<_>>())
        .fetch_all(conn)
        .await
        .map_err(db)
}

/// L15 decided for each of `calls` on its row: what [`COMPLETE`] writes,
/// or the first refusal.
fn decide_completes<'a>(
    calls: &[(&Workspace, &ItemRef, &'a CompleteRequest)], rows: &[PgRow],
) -> StoreResult<Result<CompleteWrites<'a>, RefusedEnd>> {
    let mut writes = CompleteWrites::default();
    for (ws, r, req) in calls {
        let row = rows.iter().find(|row| {
            row.get::<i64, _>("ws_id") == ws.id
                && row.get::<&str, _>("ref_prefix") == r.prefix
                && row.get::<i64, _>("ref_number") == r.number
        });
        let locked = rows::locked(row, r)?.undeleted(r)?;
        let now = locked.now;
        let lease = match lease::decide_end(&locked.slot, &req.claimant(), req.handle, now) {
            Ok(l) => l,
            Err(e) => {
                let error = shared::end_refused(e, now);
                return Ok(Err(RefusedEnd { item: locked.id, handle: req.handle, error }));
            }
        };
        let row = row.expect("rows::locked refuses a missing row");
        let end = EndWrites::of(row, "status", req, &lease)?;
        writes.id.push(locked.id);
        writes.status.push(end.changes.as_ref().map(|_| req.status.as_str()));
        writes.at.push(now);
        writes.actor.push(req.actor.user_id);
        writes.updated.push(end.updated);
        writes.changes.push(end.changes);
        writes.ws.push(ws.id);
        writes.item_ref.push(r.to_string());
        writes.released.push(end.released);
    }
    Ok(Ok(writes))
}

/// What L15 writes beside the lease's end, from the status the row had
/// (its column `status` of `row`) and the lease it ends: the one home of it
/// for [`COMPLETE`]'s arrays and for checking what [`COMPLETE_ONE`] wrote.
#[derive(Debug, PartialEq)]
struct EndWrites {
    /// The version's changes, when the status moves.
    changes: Option<Value>,
    /// `item.updated`'s data, when the status moves.
    updated: Option<Value>,
    /// `lease.released`'s data.
    released: Value,
}

impl EndWrites {
    fn of(row: &PgRow, status: &str, req: &CompleteRequest, lease: &Lease) -> StoreResult<EndWrites> {
        let from: String = row.get(status);
        let from = from.parse::<Status>().map_err(|e| pad_store::rows::corrupt("status", e))?;
        // A content change like any update: one version, `updated_at` moves.
        let changed = (from != req.status).then(|| Item::status_changes(from, req.status));
        Ok(EndWrites {
            updated: changed.as_ref().map(shared::event::updated),
            changes: changed.map(Value::Object),
            released: shared::event::ended(lease, LeaseEnd::Completed, None),
        })
    }

    /// The events the complete appends: `lease.released`, and `item.updated`
    /// when the status moved.
    fn events(&self) -> i64 {
        1 + i64::from(self.updated.is_some())
    }
}

/// Runs [`COMPLETE`]: the items as left, in the arrays' order.
async fn write_completes(conn: &mut PgConnection, writes: CompleteWrites<'_>) -> StoreResult<Vec<Item>> {
    // Each complete appends `lease.released`, and `item.updated` when its status changed.
    let n = writes.id.len();
    let events = (n + writes.updated.iter().flatten().count()) as i64;
    let rows = sqlx::query(COMPLETE)
        .bind(writes.id)
        .bind(writes.status)
        .bind(writes.at.clone())
        .bind(writes.actor)
        .bind(writes.changes)
        .bind(writes.ws)
        .bind(writes.item_ref)
        .bind(writes.updated)
        .bind(writes.released)
        .bind(EventKind::ItemUpdated.as_str())
        .bind(EventKind::LeaseReleased.as_str())
        .bind(LeaseEnd::Completed.as_str())
        .fetch_all(conn)
        .await
        .map_err(db)?;
    if rows.len() != n {
        return Err(disagree(rows.len(), "an item written per complete"));
    }
    if rows.first().map(|row| row.get::<i64, _>("events_written")) != Some(events) {
        return Err(crate::events::too_many_events());
    }
    rows.iter().zip(&writes.at).map(|(row, now)| item_from_row(row, *now)).collect()
}

/// A complete as one statement, without `BEGIN` and `COMMIT`
/// ([`COMPLETE_ONE`]; docs/leases.md, "One call, one statement"): it writes
/// only what L15 allows on the row as it read it, and only if the row is
/// still so when it writes. `None` when it wrote nothing (a refusal, a row
/// changed meanwhile, a missing or deleted item): the complete is made
/// again in a transaction, which decides under the row lock and explains a
/// refusal. What it wrote is committed when it answers: the rule then
/// decides on the row it read and must allow the same end with the same
/// data, or the error is answered (as for a lone claim).
pub(crate) async fn complete_alone(
    pool: &PgPool, ws: &Workspace, r: &ItemRef, req: &CompleteRequest,
) -> StoreResult<Option<Item>> {
    req.validate()?;
    let row = sqlx::query(COMPLETE_ONE)
        .bind(ws.id)
        .bind(r.prefix.as_str())
        .bind(r.number)
        .bind(req.status.as_str())
        .bind(req.actor.user_id)
        .bind(req.holder.as_str())
        .bind(req.claimant().user_id)
        .bind(req.handle.epoch)
        .bind(r.to_string())
        .bind(EventKind::ItemUpdated.as_str())
        .bind(EventKind::LeaseReleased.as_str())
        .bind(LeaseEnd::Completed.as_str())
        .bind(req.handle.lease_id)
        .fetch_optional(pool)
        .await
        .map_err(db)?;
    let Some(row) = row else { return Ok(None) };
    let locked = rows::locked_as(Some(&row), r, "prev_")?.undeleted(r)?;
    let now = locked.now;
    let lease = lease::decide_end(&locked.slot, &req.claimant(), req.handle, now)
        .map_err(|refused| disagree("a complete", refused))?;
    let decided = EndWrites::of(&row, "prev_status", req, &lease)?;
    let wrote =
        EndWrites { changes: row.get("w_changes"), updated: row.get("w_updated"), released: row.get("w_released") };
    if wrote != decided {
        return Err(disagree(wrote, decided));
    }
    if row.get::<i64, _>("events_written") != decided.events() {
        return Err(crate::events::too_many_events());
    }
    item_from_row(&row, now).map(Some)
}

/// [`COMPLETE`]'s arrays, one element per item.
#[derive(Default)]
struct CompleteWrites<'a> {
    id: Vec<i64>,
    status: Vec<Option<&'a str>>,
    at: Vec<Timestamp>,
    actor: Vec<i64>,
    changes: Vec<Option<Value>>,
    ws: Vec<i64>,
    item_ref: Vec<String>,
    updated: Vec<Option<Value>>,
    released: Vec<Value>,
}

impl PgStore {
    /// A lease call, made with others (`group.rs`) and counted toward the
    /// next vacuum (`vacuum.rs`).
    async fn lease_call<T>(&self, make: impl FnOnce(crate::group::Reply<T>) -> Call) -> StoreResult<T> {
        self.vacuum.count();
        self.group.call(make).await
    }

    /// A lease end made by `make` with the claim `next` it carries, as one
    /// call: they share a transaction when they can (`group.rs`), so the
    /// caller waits for one commit instead of two.
    async fn end_then_claim<T>(
        &self, next: &NextClaim, make: impl FnOnce(group::Reply<T>, Option<Box<group::Next>>) -> Call,
    ) -> StoreResult<(T, ClaimedNext)> {
        // Two lease calls toward the next vacuum.
        self.vacuum.count();
        self.vacuum.count();
        let (reply, ended) = group::reply();
        let (next_reply, claimed) = group::reply();
        let next =
            group::Next { filter: next.filter.clone(), req: next.req.clone(), count: next.count, reply: next_reply };
        self.group.queue(make(reply, Some(Box::new(next))));
        let ended = group::answered(ended).await?;
        Ok((ended, group::answered(claimed).await))
    }
}

#[async_trait]
impl LeaseOps for PgStore {
    /// A claim that the row as last committed refuses is answered before
    /// any transaction opens; the rest is one statement without a
    /// transaction, or the shared flow when the lease it replaces expired,
    /// one claim of an item at a time (docs/leases.md, "Claims on one item
    /// share their read", "A claim in one statement").
    async fn claim(&self, ws: &Workspace, r: &ItemRef, req: &ClaimRequest) -> StoreResult<ClaimOutcome> {
        let terms = req.validate(&ws.settings)?;
        self.vacuum.count();
        loop {
            if let Some(refused) = self.refused_unlocked(ws, r, req, terms).await? {
                return Err(refused);
            }
            // One claim of this instance at a time goes on to the row lock;
            // the others read again once its turn ends (`peek.rs`).
            if let Some(_turn) = self.peeks.turn(ws, r).await {
                return match claim_alone(&self.pool, ws, r, req, terms).await? {
                    Some(outcome) => Ok(outcome),
                    None => steps::claim(self, ws, r, req).await,
                };
            }
        }
    }

    async fn renew(&self, ws: &Workspace, r: &ItemRef, req: &RenewRequest) -> StoreResult<Lease> {
        let (ws, r, req) = (ws.clone(), r.clone(), req.clone());
        self.lease_call(|reply| Call::Renew { ws, r, req, reply }).await
    }

    async fn release(&self, ws: &Workspace, r: &ItemRef, req: &ReleaseRequest) -> StoreResult<ReleaseOutcome> {
        let (ws, r, req) = (ws.clone(), r.clone(), req.clone());
        self.lease_call(|reply| Call::Release { ws, r, req, reply, next: None }).await
    }

    async fn complete(&self, ws: &Workspace, r: &ItemRef, req: &CompleteRequest) -> StoreResult<Item> {
        let (ws, r, req) = (ws.clone(), r.clone(), req.clone());
        self.lease_call(|reply| Call::Complete { ws, r, req, reply, next: None }).await
    }

    async fn complete_then_claim(
        &self, ws: &Workspace, r: &ItemRef, req: &CompleteRequest, next: &NextClaim,
    ) -> StoreResult<(Item, ClaimedNext)> {
        let (ws, r, req) = (ws.clone(), r.clone(), req.clone());
        self.end_then_claim(next, |reply, next| Call::Complete { ws, r, req, reply, next }).await
    }

    async fn fail_then_claim(
        &self, ws: &Workspace, r: &ItemRef, req: &FailRequest, next: &NextClaim,
    ) -> StoreResult<(FailOutcome, ClaimedNext)> {
        let (ws, r, req) = (ws.clone(), r.clone(), req.clone());
        self.end_then_claim(next, |reply, next| Call::Fail { ws, r, req, reply, next }).await
    }

    async fn release_then_claim(
        &self, ws: &Workspace, r: &ItemRef, req: &ReleaseRequest, next: &NextClaim,
    ) -> StoreResult<(ReleaseOutcome, ClaimedNext)> {
        let (ws, r, req) = (ws.clone(), r.clone(), req.clone());
        self.end_then_claim(next, |reply, next| Call::Release { ws, r, req, reply, next }).await
    }

    async fn fail(&self, ws: &Workspace, r: &ItemRef, req: &FailRequest) -> StoreResult<FailOutcome> {
        let (ws, r, req) = (ws.clone(), r.clone(), req.clone());
        self.lease_call(|reply| Call::Fail { ws, r, req, reply, next: None }).await
    }

    async fn claim_next_many(
        &self, ws: &Workspace, filter: &FrontierFilter, req: &ClaimRequest, count: u32,
    ) -> StoreResult<Vec<(Item, ClaimOutcome)>> {
        let (ws, filter, req) = (ws.clone(), filter.clone(), req.clone());
        self.lease_call(|reply| Call::ClaimNext { ws, filter, req, count, reply }).await
    }
    async fn frontier(&self, ws: &Workspace, filter: &FrontierFilter, limit: u32) -> StoreResult<Vec<Item>> {
        let f = filter.validate()?;
        let mut qb = QueryBuilder::new(ITEM_SELECT);
        push_frontier(&mut qb, ws, &f, limit);
        let rows = qb.build().fetch_all(&self.pool).await.map_err(db)?;
        rows.iter().map(|r| item_from_row(r, r.get("db_now"))).collect()
    }

    async fn live_leases(&self) -> StoreResult<Vec<(String, u64)>> {
        let rows = sqlx::query(
            "SELECT w.slug, COUNT(*) AS n FROM items i JOIN workspaces w ON w.id = i.workspace_id
             WHERE i.lease_holder IS NOT NULL AND i.lease_expires_at > now() GROUP BY w.slug ORDER BY w.slug",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        Ok(rows.iter().map(|r| (r.get("slug"), u64::try_from(r.get::<i64, _>("n")).unwrap_or(0))).collect())
    }
}
impl PgStore {
    /// L2 without queueing (docs/leases.md, "A refusal does not queue"): a
    /// claim of an item another holder's live lease holds is refused on the
    /// row as last committed, read without a lock and outside any
    /// transaction (one round trip), so contending claimers neither wait in
    /// line for the row only to be told `lease_held` nor open a transaction
    /// to hear it. The refusal is the rule's, on the database clock, and
    /// true when read, as is `not_found` for an item missing or deleted.
    /// Anything else (free, expired, ours) goes on to the locking
    /// statement, which decides.
    async fn refused_unlocked(
        &self, ws: &Workspace, r: &ItemRef, req: &ClaimRequest, terms: Terms,
    ) -> StoreResult<Option<StoreError>> {
        // Refused as the locking statement would refuse it, so a claim of
        // no item never makes a shared transaction run again.
        let seen = self.peeks.read(ws, r).await?.undeleted(r)?;
        Ok(match lease::decide_claim(&seen.slot, &req.claimant(), terms, req.refresh, 0, seen.now) {
            ClaimDecision::Held(l) => Some(StoreError::held(l, seen.now)),
            _ => None,
        })
    }
}

#[async_trait]
impl LeaseSteps for Tx {
    /// L1-L3, L12, L13: the CLAIM statement, its reading through
    /// `decide_claim`, and the events of a grant.
    async fn claim_item(
        &mut self, ws: &Workspace, r: &ItemRef, req: &ClaimRequest, terms: Terms,
    ) -> StoreResult<Claimed> {
        let how = if self.holds_ref(r) { ClaimHow::Loaded } else { ClaimHow::Plain };
        match claim_statement(&mut self.conn, how, ws, r, req, terms).await? {
            ClaimRow::Decided(claimed) => Ok(claimed),
            ClaimRow::OverExpired { outcome, now, expiry } => {
                // The statement counted the expiry; record it.
                steps::record_expiry(self, &expiry, now).await?;
                let data = shared::event::claimed(&outcome.lease);
                self.event(ws.id, EventKind::LeaseClaimed, r, Some(req.actor), now, data).await?;
                Ok(Claimed { outcome, now, item: None })
            }
            ClaimRow::Expired => Err(disagree("nothing written", "a grant over an expired lease")),
        }
    }

    /// Finds, locks and grants in one statement (docs/leases.md, "Claim-next
    /// in one statement"); each grant is read through `decide_claim`.
    async fn claim_candidates(
        &mut self, ws: &Workspace, f: &ValidFrontierFilter, limit: usize, req: &ClaimRequest, terms: Terms,
    ) -> StoreResult<Vec<Candidate>> {
        let candidates = candidates_statement(&mut self.conn, Sent::InTx, ws, f, limit, req, terms).await?;
        for c in &candidates {
            self.hold(&c.item_ref);
        }
        Ok(candidates)
    }

    async fn count_expiry(&mut self, id: i64, now: Timestamp) -> StoreResult<(i64, Vec<String>)> {
        let row = sqlx::query(EXPIRE)
            .bind(id)
            .bind(now)
            .fetch_optional(&mut *self.conn)
            .await
            .map_err(db)?
            .ok_or_else(|| disagree("no expiry", id))?;
        Ok((row.get("lease_expiries"), row.get("labels")))
    }

    async fn take_expired(&mut self) -> StoreResult<Vec<(Expiry, String, Timestamp)>> {
        let rows = sqlx::query(OBSERVE_EXPIRED).fetch_all(&mut *self.conn).await.map_err(db)?;
        rows.iter()
            .map(|row| {
                let expiry = Expiry {
                    ws: row.get("workspace_id"),
                    threshold: u32::try_from(row.get::<i32, _>("quarantine_after_expiries")).unwrap_or(0),
                    item: row.get("id"),
                    item_ref: ItemRef { prefix: row.get("prefix"), number: row.get("number") },
                    lease: rows::lease_slot(row)?.current.expect("expired rows held a lease"),
                    expiries: row.get("lease_expiries"),
                    labels: row.get("labels"),
                };
                Ok((expiry, row.get("slug"), row.get("db_now")))
            })
            .collect()
    }

    async fn end_lease(&mut self, id: i64, how: LeaseEnd, at: Timestamp) -> StoreResult<()> {
        sqlx::query(concat!("UPDATE items SET ", ended_lease!("$2", "$3"), " WHERE id = $1"))
            .bind(id)
            .bind(at)
            .bind(how.as_str())
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn next_failures(&mut self, id: i64) -> StoreResult<i64> {
        sqlx::query_scalar("SELECT failures + 1 FROM items WHERE id = $1")
            .bind(id)
            .fetch_one(&mut *self.conn)
            .await
            .map_err(db)
    }

    async fn write_failure(
        &mut self, id: i64, failures: i64, retry_at: Timestamp, note: Option<&str>, at: Timestamp,
    ) -> StoreResult<Vec<String>> {
        sqlx::query_scalar(
            "UPDATE items SET failures = $2, retry_at = $3, last_failure_note = $4, last_failure_at = $5,
                    lease_note = COALESCE($4, lease_note),
                    lease_note_holder = CASE WHEN $4 IS NULL THEN lease_note_holder ELSE lease_holder END,
                    lease_note_lease_id = CASE WHEN $4 IS NULL THEN lease_note_lease_id ELSE lease_id END
             WHERE id = $1 RETURNING labels",
        )
        .bind(id)
        .bind(failures)
        .bind(retry_at)
        .bind(note)
        .bind(at)
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)
    }

    async fn record_success(&mut self, id: i64, at: Timestamp) -> StoreResult<()> {
        sqlx::query(
            "UPDATE items SET last_success_at = $2, retry_at = NULL,
                    lease_note = NULL, lease_note_holder = NULL, lease_note_lease_id = NULL
             WHERE id = $1",
        )
        .bind(id)
        .bind(at)
        .execute(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(())
    }
}

/// The statements the lease calls' connections run, by name: the fixed
/// ones, and claim-next's, in each way it is sent, as built for `ws` and
/// `req` with no filter.
fn lane_statements(ws: &Workspace, req: &ClaimRequest) -> StoreResult<Vec<(&'static str, String)>> {
    let fixed = [
        ("claim", CLAIM),
        ("claim alone", CLAIM_ALONE),
        ("claim of a locked candidate", CLAIM_LOADED),
        ("lock for complete", LOCK_FOR_COMPLETE),
        ("complete", COMPLETE),
        ("complete alone", COMPLETE_ONE),
        ("renew", RENEW),
        ("release", RELEASE),
        ("expire", EXPIRE),
    ];
    let mut all: Vec<_> = fixed.into_iter().map(|(name, sql)| (name, sql.to_string())).collect();
    let (f, terms, reqs) = (FrontierFilter::default().validate()?, req.validate(&ws.settings)?, [req]);
    for (name, sent) in
        [("claim-next", Sent::InTx), ("claim-next alone", Sent::Alone), ("claim-nexts together", Sent::Together(&reqs))]
    {
        all.push((name, candidates_query(&sent, ws, &f, 1, req, terms).into_sql().as_str().to_string()));
    }
    Ok(all)
}

/// The plan PostgreSQL keeps for each statement the lease calls'
/// connections run (`EXPLAIN` of the generic plan, on one of them): see
/// `PgStore::lease_plans`.
pub(crate) async fn lease_plans(
    pool: &PgPool, ws: &Workspace, req: &ClaimRequest,
) -> StoreResult<Vec<(&'static str, String)>> {
    // Taken out of the pool, and closed after: a look that failed half-way
    // leaves its prepared statement behind, and no lease call may meet it.
    let mut conn = pool.acquire().await.map_err(db)?.detach();
    let mut plans = Vec::new();
    for (name, sql) in lane_statements(ws, req)? {
        // Every parameter NULL: a generic plan does not look at their values.
        let params = (1..).take_while(|n| sql.contains(&format!("${n}"))).count();
        let args = vec!["NULL"; params].join(", ");
        let explain = format!("PREPARE pad_plan AS {sql}; EXPLAIN EXECUTE pad_plan({args}); DEALLOCATE pad_plan");
        let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(explain)).fetch_all(&mut conn).await.map_err(db)?;
        plans.push((name, rows.iter().map(|row| row.get::<String, _>(0)).collect::<Vec<_>>().join("\n")));
    }
    Ok(plans)
}

/// The frontier predicate and order (L11), appended to a SELECT over
/// `items i`. "No live lease" is judged by the statement's `now()`.
pub(crate) fn push_frontier(qb: &mut QueryBuilder<Postgres>, ws: &Workspace, f: &ValidFrontierFilter, limit: u32) {
    qb.push(" WHERE i.workspace_id = ").push_bind(ws.id);
    qb.push(" AND i.deleted_at IS NULL AND i.status = 'open'");
    qb.push(" AND (i.lease_holder IS NULL OR i.lease_expires_at <= now())");
    // L14, L16: deferred and backing-off items wait.
    qb.push(" AND (i.not_before IS NULL OR i.not_before <= now()) AND (i.retry_at IS NULL OR i.retry_at <= now())");
    for r in &f.exclude {
        qb.push(" AND NOT (i.prefix = ")
            .push_bind(r.prefix.clone())
            .push(" AND i.number = ")
            .push_bind(r.number)
            .push(")");
    }
    if let Some(s) = &f.skip_session {
        // The live or expired lease's session, else the last ended one's.
        qb.push(" AND COALESCE(i.lease_session_id, i.last_lease_session_id) IS DISTINCT FROM ").push_bind(s.clone());
    }
    qb.push(
        " AND NOT EXISTS (SELECT 1 FROM item_blockers ib JOIN items b ON b.id = ib.blocker_id
           WHERE ib.item_id = i.id AND b.deleted_at IS NULL AND b.status NOT IN ('done', 'cancelled'))",
    );
    if !f.kinds.is_empty() {
        qb.push(" AND i.kind = ANY(").push_bind(f.kinds.clone()).push(")");
    }
    if !f.labels.is_empty() {
        qb.push(" AND i.labels @> ").push_bind(f.labels.clone());
    }
    if !f.without_labels.is_empty() {
        qb.push(" AND NOT (i.labels && ").push_bind(f.without_labels.clone()).push(")");
    }
    if let Some(p) = f.min_priority {
        qb.push(" AND i.priority >= ").push_bind(p.rank());
    }
    if let Some(p) = &f.parent {
        push_parent(qb, ws, p);
    }
    // The limit is written into the statement, not bound: with it known,
    // PostgreSQL can keep one plan for each limit instead of planning every
    // claim-next again (docs/benchmarks.md, "Earlier run: lease calls that
    // share a transaction").
    qb.push(concat!(" ORDER BY ", frontier_order!("i"), " LIMIT ")).push(limit.clamp(1, LIST_LIMIT_MAX));
}
