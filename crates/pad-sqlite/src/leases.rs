//! Leases: the lease rules' reads and writes (docs/leases.md), and the
//! lease steps of the shared flows (`pad_store::steps`).

use async_trait::async_trait;
use pad_core::EventKind;
use pad_core::lease::{self, ClaimDecision, LeaseEnd, ReleaseDecision, RenewDecision, Terms};
use pad_core::{FrontierFilter, Item, ItemRef, LIST_LIMIT_MAX, Lease, Timestamp, ValidFrontierFilter, Workspace};
use pad_store::steps::{self, Begin, Candidate, Claimed, EventSteps, Expiry, ItemSteps, LeaseSteps, Locked};
use pad_store::{
    ClaimOutcome, ClaimRequest, LeaseOps, ReleaseOutcome, ReleaseRequest, RenewRequest, StoreError, StoreResult, shared,
};
use rusqlite::Connection;

use crate::items::push_parent;
use crate::rows::{self, ITEM_SELECT, item_from_row};
use crate::sql::{Col, Db, Sql, micros};
use crate::{SqliteStore, Tx};

#[async_trait]
impl LeaseOps for SqliteStore {
    async fn renew(&self, ws: &Workspace, r: &ItemRef, req: &RenewRequest) -> StoreResult<Lease> {
        let ttl = req.validate(&ws.settings)?;
        let mut tx = self.begin().await?;
        let renewed = renew_in(&mut tx, ws, r, req, ttl).await;
        steps::finish(tx, renewed.map(|l| (l, true))).await
    }

    async fn release(&self, ws: &Workspace, r: &ItemRef, req: &ReleaseRequest) -> StoreResult<ReleaseOutcome> {
        req.validate()?;
        let mut tx = self.begin().await?;
        let released = release_in(&mut tx, ws, r, req).await;
        steps::finish(tx, released).await
    }

    async fn frontier(&self, ws: &Workspace, filter: &FrontierFilter, limit: u32) -> StoreResult<Vec<Item>> {
        let f = filter.validate()?;
        let now = self.clock.read();
        let mut q = Sql::new(ITEM_SELECT);
        push_frontier(&mut q, ws, &f, now, limit);
        self.read(move |c| c.all_built(&q, |row| item_from_row(row, now))).await
    }

    async fn live_leases(&self) -> StoreResult<Vec<(String, u64)>> {
        let now = micros(self.clock.read());
        self.read(move |c| {
            c.all(
                "SELECT w.slug, COUNT(*) AS n FROM items i JOIN workspaces w ON w.id = i.workspace_id
                 WHERE i.lease_holder IS NOT NULL AND i.lease_expires_at > ? GROUP BY w.slug ORDER BY w.slug",
                [now],
                |r| Ok((r.col("slug")?, u64::try_from(r.col::<i64>("n")?).unwrap_or(0))),
            )
        })
        .await
    }
}
#[async_trait]
impl LeaseSteps for Tx {
    async fn claim_item(
        &mut self, ws: &Workspace, r: &ItemRef, req: &ClaimRequest, terms: Terms,
    ) -> StoreResult<Claimed> {
        let now = self.now;
        let mut row = claim_row(self, ws, r)?;
        row.locked = row.locked.undeleted(r)?;
        if let Some(old) = row.locked.slot.current.clone().filter(|l| !l.is_live(now)) {
            steps::expire(self, ws, row.locked.id, r, old, now).await?;
            row = claim_row(self, ws, r)?;
        }
        let outcome = claim_locked(self, ws, r, &row, req, terms, now).await?;
        Ok(Claimed { outcome, now, item: None })
    }

    async fn claim_candidates(
        &mut self, ws: &Workspace, f: &ValidFrontierFilter, limit: usize, _req: &ClaimRequest, _terms: Terms,
    ) -> StoreResult<Vec<Candidate>> {
        // The write lock serializes claim-next callers, so no two can pick the
        // same item and none waits on another's rows. A few spare candidates
        // save a second read when expiries quarantine the first.
        let now = self.now;
        let mut q = Sql::new(
            "SELECT i.id, i.prefix, i.number, i.lease_holder, i.lease_user_id, i.lease_session_id, i.lease_epoch,
                    i.lease_acquired_at, i.lease_renewed_at, i.lease_expires_at, i.lease_ttl_seconds, i.lease_hold_until, i.lease_id
             FROM items i LEFT JOIN users a ON a.id = i.assignee_id",
        );
        push_frontier(&mut q, ws, f, now, u32::try_from(limit.max(16)).unwrap_or(u32::MAX));
        self.conn().all_built(&q, |row| {
            Ok(Candidate {
                id: row.col("id")?,
                item_ref: ItemRef { prefix: row.col("prefix")?, number: row.col("number")? },
                expired: rows::lease_slot(row)?.current.filter(|l| !l.is_live(now)),
                now,
                // Claimed by the flow: a claim here is a call in this process.
                granted: None,
            })
        })
    }

    async fn count_expiry(&mut self, id: i64, _now: Timestamp) -> StoreResult<(i64, Vec<String>)> {
        // L18: the expired lease becomes the last lease, ended at its expiry.
        self.conn().one(
            "UPDATE items SET lease_expiries = lease_expiries + 1,
                    last_lease_id = lease_id, last_lease_epoch = lease_epoch, last_lease_holder = lease_holder,
                    last_lease_session_id = lease_session_id, last_lease_acquired_at = lease_acquired_at,
                    last_lease_ended_at = lease_expires_at, last_lease_ended = 'expired',
                    last_lease_note = CASE WHEN lease_note_lease_id = lease_id THEN lease_note END,
                    lease_holder = NULL, lease_user_id = NULL, lease_session_id = NULL, lease_acquired_at = NULL,
                    lease_renewed_at = NULL, lease_expires_at = NULL, lease_ttl_seconds = NULL, lease_hold_until = NULL
             WHERE id = ? RETURNING lease_expiries, labels",
            [id],
            |row| Ok((row.col("lease_expiries")?, row.json("labels")?)),
        )
    }

    async fn take_expired(&mut self) -> StoreResult<Vec<(Expiry, String, Timestamp)>> {
        let now = self.now;
        let rows = self.conn().all(
            "SELECT i.id, i.workspace_id, w.slug, i.prefix, i.number, w.quarantine_after_expiries, i.lease_holder,
                    i.lease_user_id, i.lease_session_id, i.lease_epoch, i.lease_acquired_at, i.lease_renewed_at,
                    i.lease_expires_at, i.lease_ttl_seconds, i.lease_hold_until, i.lease_id
             FROM items i JOIN workspaces w ON w.id = i.workspace_id
             WHERE i.lease_holder IS NOT NULL AND i.lease_expires_at <= ? ORDER BY i.lease_expires_at LIMIT 500",
            [micros(now)],
            |row| {
                let expiry = Expiry {
                    ws: row.col("workspace_id")?,
                    threshold: u32::try_from(row.col::<i64>("quarantine_after_expiries")?).unwrap_or(0),
                    item: row.col("id")?,
                    item_ref: ItemRef { prefix: row.col("prefix")?, number: row.col("number")? },
                    lease: rows::lease_slot(row)?.current.expect("selected rows hold a lease"),
                    expiries: 0,
                    labels: Vec::new(),
                };
                Ok((expiry, row.col::<String>("slug")?))
            },
        )?;
        let mut taken = Vec::with_capacity(rows.len());
        for (mut expiry, slug) in rows {
            (expiry.expiries, expiry.labels) = self.count_expiry(expiry.item, now).await?;
            taken.push((expiry, slug, now));
        }
        Ok(taken)
    }

    async fn end_lease(&mut self, id: i64, how: LeaseEnd, at: Timestamp) -> StoreResult<()> {
        // The epoch counter and the last note stay.
        self.conn().exec(
            "UPDATE items SET last_lease_id = lease_id, last_lease_epoch = lease_epoch, last_lease_holder = lease_holder,
                    last_lease_session_id = lease_session_id, last_lease_acquired_at = lease_acquired_at,
                    last_lease_ended_at = ?, last_lease_ended = ?,
                    last_lease_note = CASE WHEN lease_note_lease_id = lease_id THEN lease_note END,
                    lease_holder = NULL, lease_user_id = NULL, lease_session_id = NULL, lease_acquired_at = NULL,
                    lease_renewed_at = NULL, lease_expires_at = NULL, lease_ttl_seconds = NULL, lease_hold_until = NULL
             WHERE id = ?",
            (micros(at), how.as_str(), id),
        )?;
        Ok(())
    }

    async fn next_failures(&mut self, id: i64) -> StoreResult<i64> {
        self.conn().scalar("SELECT failures + 1 FROM items WHERE id = ?", [id])
    }

    async fn write_failure(
        &mut self, id: i64, failures: i64, retry_at: Timestamp, note: Option<&str>, at: Timestamp,
    ) -> StoreResult<Vec<String>> {
        self.conn().one(
            "UPDATE items SET failures = ?1, retry_at = ?2, last_failure_note = ?3, last_failure_at = ?5,
                    lease_note = COALESCE(?3, lease_note),
                    lease_note_holder = CASE WHEN ?3 IS NULL THEN lease_note_holder ELSE lease_holder END,
                    lease_note_lease_id = CASE WHEN ?3 IS NULL THEN lease_note_lease_id ELSE lease_id END
             WHERE id = ?4 RETURNING labels",
            (failures, micros(retry_at), note, id, micros(at)),
            |row| row.json("labels"),
        )
    }

    async fn record_success(&mut self, id: i64, at: Timestamp) -> StoreResult<()> {
        self.conn().exec(
            "UPDATE items SET last_success_at = ?, retry_at = NULL,
                    lease_note = NULL, lease_note_holder = NULL, lease_note_lease_id = NULL
             WHERE id = ?",
            (micros(at), id),
        )?;
        Ok(())
    }
}

/// L4 inside `tx`; on an error the caller rolls back.
async fn renew_in(
    tx: &mut Tx, ws: &Workspace, r: &ItemRef, req: &RenewRequest, ttl: Option<lease::Ttl>,
) -> StoreResult<Lease> {
    let now = tx.now;
    let locked = tx.lock_item(ws, r).await?.undeleted(r)?;
    match lease::decide_renew(&locked.slot, &req.claimant(), req.handle, ttl, now) {
        RenewDecision::Renewed(l) => {
            write_lease(tx.conn(), locked.id, &l, req.note.as_deref())?;
            Ok(l)
        }
        RenewDecision::Lost(live) => {
            Err(steps::explain_lost(tx, locked.id, req.handle, StoreError::lost(live, now)).await)
        }
        RenewDecision::Held(l) => Err(StoreError::held(l, now)),
    }
}

/// L6 inside `tx`, and whether it wrote anything to keep; on an error the
/// caller rolls back.
async fn release_in(
    tx: &mut Tx, ws: &Workspace, r: &ItemRef, req: &ReleaseRequest,
) -> StoreResult<(ReleaseOutcome, bool)> {
    let now = tx.now;
    let locked = tx.lock_item(ws, r).await?;
    let (lease, kind) = match lease::decide_release(&locked.slot, &req.claimant(), req.handle, req.force, now) {
        ReleaseDecision::NoLiveLease => {
            // L5/L13: a recorded but expired lease is observed here, once.
            let expired = match locked.slot.current {
                Some(old) => {
                    steps::expire(tx, ws, locked.id, r, old, now).await?;
                    true
                }
                None => false,
            };
            return Ok((ReleaseOutcome::no_live_lease(), expired));
        }
        ReleaseDecision::Held(l) => return Err(StoreError::held(l, now)),
        ReleaseDecision::Lost(l) => return Err(StoreError::lost(Some(l), now)),
        ReleaseDecision::Released(l) => (l, LeaseEnd::Released),
        ReleaseDecision::Broken(l) => (l, LeaseEnd::Broken),
    };
    tx.end_lease(locked.id, kind, now).await?;
    if kind == LeaseEnd::Released && req.succeeded {
        tx.record_success(locked.id, now).await?;
    }
    if kind == LeaseEnd::Broken {
        SqliteStore::record_break(tx.conn(), locked.id, &lease, req.reason.as_deref(), req.actor)?;
    }
    let event = if kind == LeaseEnd::Broken { EventKind::LeaseBroken } else { EventKind::LeaseReleased };
    let data = shared::event::ended(&lease, kind, req.reason.as_deref());
    tx.event(ws.id, event, r, Some(req.actor), now, data).await?;
    Ok((ReleaseOutcome::ended(lease, kind, now), true))
}

/// An item's row as a claim needs it, read in one statement under the
/// write lock: its lease slot, the handoff note a grant passes on (L12) and
/// the workspace's next lease id.
struct ClaimRow {
    locked: Locked,
    note: (Option<String>, Option<String>),
    next_lease_id: i64,
}

fn claim_row(tx: &Tx, ws: &Workspace, r: &ItemRef) -> StoreResult<ClaimRow> {
    let now = tx.now;
    tx.conn()
        .opt(
            "SELECT i.id, i.deleted_at, i.lease_holder, i.lease_user_id, i.lease_session_id, i.lease_epoch,
                    i.lease_acquired_at, i.lease_renewed_at, i.lease_expires_at, i.lease_ttl_seconds,
                    i.lease_hold_until, i.lease_id, i.lease_note, i.lease_note_holder, w.next_lease_id
             FROM items i JOIN workspaces w ON w.id = i.workspace_id
             WHERE i.workspace_id = ? AND i.prefix = ? AND i.number = ?",
            (ws.id, &r.prefix, r.number),
            |row| {
                Ok(ClaimRow {
                    locked: rows::locked_from_row(row, now)?,
                    note: (row.col("lease_note")?, row.col("lease_note_holder")?),
                    next_lease_id: row.col("next_lease_id")?,
                })
            },
        )?
        .ok_or_else(|| StoreError::not_found(format!("item {r}")))
}

/// The grant-or-refresh half of a claim, on the row [`claim_row`] read.
async fn claim_locked(
    tx: &mut Tx, ws: &Workspace, r: &ItemRef, row: &ClaimRow, req: &ClaimRequest, terms: Terms, now: Timestamp,
) -> StoreResult<ClaimOutcome> {
    let claimant = req.claimant();
    let id = row.locked.id;
    match lease::decide_claim(&row.locked.slot, &claimant, terms, req.refresh, row.next_lease_id, now) {
        ClaimDecision::Held(l) => Err(StoreError::held(l, now)),
        ClaimDecision::Refresh(l) => {
            write_lease(tx.conn(), id, &l, req.note.as_deref())?;
            Ok(ClaimOutcome { lease: l, refreshed: true, previous_note: None, previous_holder: None })
        }
        ClaimDecision::Grant { lease: l, .. } => {
            tx.conn().exec("UPDATE workspaces SET next_lease_id = next_lease_id + 1 WHERE id = ?", [ws.id])?;
            write_lease(tx.conn(), id, &l, req.note.as_deref())?;
            let data = shared::event::claimed(&l);
            tx.event(ws.id, EventKind::LeaseClaimed, r, Some(req.actor), now, data).await?;
            let (previous_note, previous_holder) = row.note.clone();
            Ok(ClaimOutcome { lease: l, refreshed: false, previous_note, previous_holder })
        }
    }
}

fn write_lease(conn: &Connection, id: i64, l: &Lease, note: Option<&str>) -> StoreResult<()> {
    conn.exec(
        "UPDATE items SET lease_holder = ?1, lease_user_id = ?2, lease_session_id = ?3, lease_epoch = ?4,
                lease_acquired_at = ?5, lease_renewed_at = ?6, lease_expires_at = ?7, lease_ttl_seconds = ?8,
                lease_note = COALESCE(?9, lease_note),
                lease_note_holder = CASE WHEN ?9 IS NULL THEN lease_note_holder ELSE ?1 END,
                lease_note_lease_id = CASE WHEN ?9 IS NULL THEN lease_note_lease_id ELSE ?10 END,
                lease_id = ?10, lease_hold_until = ?12
         WHERE id = ?11",
        rusqlite::params![
            &l.holder,
            l.user_id,
            &l.session_id,
            l.epoch,
            micros(l.acquired_at),
            micros(l.renewed_at),
            micros(l.expires_at),
            i64::from(l.ttl_seconds),
            note,
            l.lease_id,
            id,
            l.hold_until.map(micros),
        ],
    )?;
    Ok(())
}

/// The frontier predicate and order (L11), appended to a SELECT over `items i`
/// (joined with `users a`).
pub(crate) fn push_frontier(q: &mut Sql, ws: &Workspace, f: &ValidFrontierFilter, now: Timestamp, limit: u32) {
    q.push(" WHERE i.workspace_id = ").bind(ws.id);
    q.push(" AND i.deleted_at IS NULL AND i.status = 'open'");
    q.push(" AND (i.lease_holder IS NULL OR i.lease_expires_at <= ").bind(micros(now)).push(")");
    // L14, L16: deferred and backing-off items wait.
    q.push(" AND (i.not_before IS NULL OR i.not_before <= ").bind(micros(now)).push(")");
    q.push(" AND (i.retry_at IS NULL OR i.retry_at <= ").bind(micros(now)).push(")");
    for r in &f.exclude {
        q.push(" AND NOT (i.prefix = ").bind(r.prefix.clone()).push(" AND i.number = ").bind(r.number).push(")");
    }
    if let Some(s) = &f.skip_session {
        // The live or expired lease's session, else the last ended one's.
        q.push(" AND COALESCE(i.lease_session_id, i.last_lease_session_id) IS NOT ").bind(s.clone());
    }
    q.push(
        " AND NOT EXISTS (SELECT 1 FROM item_blockers ib JOIN items b ON b.id = ib.blocker_id
           WHERE ib.item_id = i.id AND b.deleted_at IS NULL AND b.status NOT IN ('done', 'cancelled'))",
    );
    q.bind_in("i.kind", f.kinds.iter().cloned());
    for l in &f.labels {
        q.push(" AND EXISTS (SELECT 1 FROM json_each(i.labels) WHERE value = ").bind(l.clone()).push(")");
    }
    for l in &f.without_labels {
        q.push(" AND NOT EXISTS (SELECT 1 FROM json_each(i.labels) WHERE value = ").bind(l.clone()).push(")");
    }
    if let Some(p) = f.min_priority {
        q.push(" AND i.priority >= ").bind(p.rank());
    }
    if let Some(p) = &f.parent {
        push_parent(q, ws, p);
    }
    q.push(" ORDER BY i.priority DESC, i.created_at, i.id LIMIT ").bind(i64::from(limit.clamp(1, LIST_LIMIT_MAX)));
}
