//! Leases: the lease rules' reads and writes (docs/leases.md), and the
//! lease steps of the shared flows (`pad_store::steps`).

use async_trait::async_trait;
use pad_core::EventKind;
use pad_core::lease::{self, ClaimDecision, LeaseEnd, ReleaseDecision, RenewDecision, Ttl};
use pad_core::{FrontierFilter, Item, ItemRef, LIST_LIMIT_MAX, Lease, Timestamp, ValidFrontierFilter, Workspace};
use pad_store::steps::{self, Begin, Candidate, EventSteps, Expiry, ItemSteps, LeaseSteps, Locked, WriteTx};
use pad_store::{
    ClaimOutcome, ClaimRequest, ReleaseOutcome, ReleaseRequest, RenewRequest, StoreError, StoreResult, shared,
};
use sqlx::sqlite::SqliteConnection;
use sqlx::{QueryBuilder, Row, Sqlite};

use crate::items::{push_in, push_parent};
use crate::rows::{self, ITEM_SELECT, item_from_row, micros};
use crate::{SqliteStore, Tx, db};

pub(crate) async fn renew(s: &SqliteStore, ws: &Workspace, r: &ItemRef, req: &RenewRequest) -> StoreResult<Lease> {
    let ttl = req.validate(&ws.settings)?;
    let mut tx = s.begin().await?;
    let now = tx.now;
    let locked = tx.lock_item(ws, r).await?.live(r)?;
    let claimant = req.claimant();
    match lease::decide_renew(&locked.slot, &claimant, req.handle, ttl, now) {
        RenewDecision::Renewed(l) => {
            write_lease(&mut tx.conn, locked.id, &l, req.note.as_deref()).await?;
            tx.commit().await?;
            Ok(l)
        }
        RenewDecision::Lost(live) => {
            Err(steps::explain_lost(&mut tx, locked.id, req.handle, StoreError::lost(live, now)).await)
        }
        RenewDecision::Held(l) => Err(StoreError::held(l, now)),
    }
}

pub(crate) async fn release(
    s: &SqliteStore,
    ws: &Workspace,
    r: &ItemRef,
    req: &ReleaseRequest,
) -> StoreResult<ReleaseOutcome> {
    req.validate()?;
    let mut tx = s.begin().await?;
    let now = tx.now;
    let locked = tx.lock_item(ws, r).await?;
    let claimant = req.claimant();
    let (lease, kind, reason) = match lease::decide_release(&locked.slot, &claimant, req.handle, req.force, now) {
        ReleaseDecision::NoLiveLease => {
            // L5/L13: a recorded but expired lease is observed here, once.
            if let Some(old) = locked.slot.current {
                steps::expire(&mut tx, ws, locked.id, r, old, now).await?;
                tx.commit().await?;
            }
            return Ok(ReleaseOutcome { released: false, reason: "no live lease", lease: None });
        }
        ReleaseDecision::Held(l) => return Err(StoreError::held(l, now)),
        ReleaseDecision::Lost(l) => return Err(StoreError::lost(Some(l), now)),
        ReleaseDecision::Released(l) => (l, LeaseEnd::Released, "released"),
        ReleaseDecision::Broken(l) => (l, LeaseEnd::Broken, "broken"),
    };
    tx.end_lease(locked.id, kind, now).await?;
    if kind == LeaseEnd::Broken {
        SqliteStore::record_break(&mut tx.conn, locked.id, &lease, req.reason.as_deref(), req.actor).await?;
    }
    let event = if kind == LeaseEnd::Broken { EventKind::LeaseBroken } else { EventKind::LeaseReleased };
    let data = shared::event::ended(&lease, kind, req.reason.as_deref());
    tx.event(ws.id, event, r, Some(req.actor), now, data).await?;
    tx.commit().await?;
    Ok(ReleaseOutcome { released: true, reason, lease: Some(lease) })
}

pub(crate) async fn frontier(
    s: &SqliteStore,
    ws: &Workspace,
    filter: &FrontierFilter,
    limit: u32,
) -> StoreResult<Vec<Item>> {
    let f = filter.validate()?;
    let now = s.clock.read();
    let mut qb = QueryBuilder::new(ITEM_SELECT);
    push_frontier(&mut qb, ws, &f, now, limit);
    let rows = qb.build().fetch_all(&s.reader).await.map_err(db)?;
    rows.iter().map(|r| item_from_row(r, now)).collect()
}

pub(crate) async fn live_leases(s: &SqliteStore) -> StoreResult<Vec<(String, u64)>> {
    let rows = sqlx::query(
        "SELECT w.slug, COUNT(*) AS n FROM items i JOIN workspaces w ON w.id = i.workspace_id
         WHERE i.lease_holder IS NOT NULL AND i.lease_expires_at > ? GROUP BY w.slug ORDER BY w.slug",
    )
    .bind(micros(s.clock.read()))
    .fetch_all(&s.reader)
    .await
    .map_err(db)?;
    Ok(rows.iter().map(|r| (r.get("slug"), u64::try_from(r.get::<i64, _>("n")).unwrap_or(0))).collect())
}

#[async_trait]
impl LeaseSteps for Tx {
    async fn claim_item(
        &mut self,
        ws: &Workspace,
        r: &ItemRef,
        req: &ClaimRequest,
        ttl: Ttl,
    ) -> StoreResult<(ClaimOutcome, Timestamp)> {
        let now = self.now;
        let mut locked = self.lock_item(ws, r).await?.live(r)?;
        if let Some(old) = locked.slot.current.clone().filter(|l| !l.is_live(now)) {
            steps::expire(self, ws, locked.id, r, old, now).await?;
            locked = self.lock_item(ws, r).await?;
        }
        let out = claim_locked(self, ws, r, &locked, req, ttl, now).await?;
        Ok((out, now))
    }

    async fn claim_candidates(&mut self, ws: &Workspace, f: &ValidFrontierFilter) -> StoreResult<Vec<Candidate>> {
        // The write lock serializes claim-next callers, so no two can pick the
        // same item and none waits on another's rows.
        let now = self.now;
        let mut qb = QueryBuilder::new(
            "SELECT i.id, i.prefix, i.number, i.lease_holder, i.lease_user_id, i.lease_session_id, i.lease_epoch,
                    i.lease_acquired_at, i.lease_renewed_at, i.lease_expires_at, i.lease_ttl_seconds, i.lease_id
             FROM items i LEFT JOIN users a ON a.id = i.assignee_id",
        );
        push_frontier(&mut qb, ws, f, now, 16);
        let rows = qb.build().fetch_all(&mut *self.conn).await.map_err(db)?;
        rows.iter()
            .map(|row| {
                Ok(Candidate {
                    id: row.get("id"),
                    item_ref: ItemRef { prefix: row.get("prefix"), number: row.get("number") },
                    expired: rows::lease_slot(row)?.current.filter(|l| !l.is_live(now)),
                    now,
                })
            })
            .collect()
    }

    async fn count_expiry(&mut self, id: i64, _now: Timestamp) -> StoreResult<(i64, Vec<String>)> {
        // L18: the expired lease becomes the last lease, ended at its expiry.
        let row = sqlx::query(
            "UPDATE items SET lease_expiries = lease_expiries + 1,
                    last_lease_id = lease_id, last_lease_epoch = lease_epoch, last_lease_holder = lease_holder,
                    last_lease_session_id = lease_session_id, last_lease_acquired_at = lease_acquired_at,
                    last_lease_ended_at = lease_expires_at, last_lease_ended = 'expired',
                    last_lease_note = CASE WHEN lease_note_lease_id = lease_id THEN lease_note END,
                    lease_holder = NULL, lease_user_id = NULL, lease_session_id = NULL, lease_acquired_at = NULL,
                    lease_renewed_at = NULL, lease_expires_at = NULL, lease_ttl_seconds = NULL
             WHERE id = ? RETURNING lease_expiries, labels",
        )
        .bind(id)
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)?;
        let labels = serde_json::from_str(row.get("labels")).map_err(|e| StoreError::Internal(e.to_string()))?;
        Ok((row.get("lease_expiries"), labels))
    }

    async fn take_expired(&mut self) -> StoreResult<Vec<(Expiry, String, Timestamp)>> {
        let now = self.now;
        let rows = sqlx::query(
            "SELECT i.id, i.workspace_id, w.slug, i.prefix, i.number, w.quarantine_after_expiries, i.lease_holder,
                    i.lease_user_id, i.lease_session_id, i.lease_epoch, i.lease_acquired_at, i.lease_renewed_at,
                    i.lease_expires_at, i.lease_ttl_seconds, i.lease_id
             FROM items i JOIN workspaces w ON w.id = i.workspace_id
             WHERE i.lease_holder IS NOT NULL AND i.lease_expires_at <= ? ORDER BY i.lease_expires_at LIMIT 500",
        )
        .bind(micros(now))
        .fetch_all(&mut *self.conn)
        .await
        .map_err(db)?;
        let mut taken = Vec::with_capacity(rows.len());
        for row in &rows {
            let lease = rows::lease_slot(row)?.current.expect("selected rows hold a lease");
            let id: i64 = row.get("id");
            let (expiries, labels) = self.count_expiry(id, now).await?;
            let expiry = Expiry {
                ws: row.get("workspace_id"),
                threshold: u32::try_from(row.get::<i64, _>("quarantine_after_expiries")).unwrap_or(0),
                item: id,
                item_ref: ItemRef { prefix: row.get("prefix"), number: row.get("number") },
                lease,
                expiries,
                labels,
            };
            taken.push((expiry, row.get("slug"), now));
        }
        Ok(taken)
    }

    async fn end_lease(&mut self, id: i64, how: LeaseEnd, at: Timestamp) -> StoreResult<()> {
        // The epoch counter and the last note stay.
        sqlx::query(
            "UPDATE items SET last_lease_id = lease_id, last_lease_epoch = lease_epoch, last_lease_holder = lease_holder,
                    last_lease_session_id = lease_session_id, last_lease_acquired_at = lease_acquired_at,
                    last_lease_ended_at = ?, last_lease_ended = ?,
                    last_lease_note = CASE WHEN lease_note_lease_id = lease_id THEN lease_note END,
                    lease_holder = NULL, lease_user_id = NULL, lease_session_id = NULL, lease_acquired_at = NULL,
                    lease_renewed_at = NULL, lease_expires_at = NULL, lease_ttl_seconds = NULL
             WHERE id = ?",
        )
        .bind(micros(at))
        .bind(how.as_str())
        .bind(id)
        .execute(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn next_failures(&mut self, id: i64) -> StoreResult<i64> {
        sqlx::query_scalar("SELECT failures + 1 FROM items WHERE id = ?")
            .bind(id)
            .fetch_one(&mut *self.conn)
            .await
            .map_err(db)
    }

    async fn write_failure(
        &mut self,
        id: i64,
        failures: i64,
        retry_at: Timestamp,
        note: Option<&str>,
    ) -> StoreResult<Vec<String>> {
        let labels: String = sqlx::query_scalar(
            "UPDATE items SET failures = ?, retry_at = ?, last_failure_note = ?,
                    lease_note = COALESCE(?, lease_note),
                    lease_note_holder = CASE WHEN ? IS NULL THEN lease_note_holder ELSE lease_holder END,
                    lease_note_lease_id = CASE WHEN ? IS NULL THEN lease_note_lease_id ELSE lease_id END
             WHERE id = ? RETURNING labels",
        )
        .bind(failures)
        .bind(micros(retry_at))
        .bind(note)
        .bind(note)
        .bind(note)
        .bind(note)
        .bind(id)
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)?;
        serde_json::from_str(&labels).map_err(|e| StoreError::Internal(e.to_string()))
    }
}

/// The grant-or-refresh half of a claim, on an item already locked by
/// this write transaction. Shared by claim and claim-next.
async fn claim_locked(
    tx: &mut Tx,
    ws: &Workspace,
    r: &ItemRef,
    locked: &Locked,
    req: &ClaimRequest,
    ttl: Ttl,
    now: Timestamp,
) -> StoreResult<ClaimOutcome> {
    let claimant = req.claimant();
    let next_id: i64 = sqlx::query_scalar("SELECT next_lease_id FROM workspaces WHERE id = ?")
        .bind(ws.id)
        .fetch_one(&mut *tx.conn)
        .await
        .map_err(db)?;
    match lease::decide_claim(&locked.slot, &claimant, ttl, req.refresh, next_id, now) {
        ClaimDecision::Held(l) => Err(StoreError::held(l, now)),
        ClaimDecision::Refresh(l) => {
            write_lease(&mut tx.conn, locked.id, &l, req.note.as_deref()).await?;
            Ok(ClaimOutcome { lease: l, refreshed: true, previous_note: None, previous_holder: None })
        }
        ClaimDecision::Grant { lease: l, .. } => {
            sqlx::query("UPDATE workspaces SET next_lease_id = next_lease_id + 1 WHERE id = ?")
                .bind(ws.id)
                .execute(&mut *tx.conn)
                .await
                .map_err(db)?;
            let prev = sqlx::query("SELECT lease_note, lease_note_holder FROM items WHERE id = ?")
                .bind(locked.id)
                .fetch_one(&mut *tx.conn)
                .await
                .map_err(db)?;
            write_lease(&mut tx.conn, locked.id, &l, req.note.as_deref()).await?;
            let data = shared::event::claimed(&l);
            tx.event(ws.id, EventKind::LeaseClaimed, r, Some(req.actor), now, data).await?;
            Ok(ClaimOutcome {
                lease: l,
                refreshed: false,
                previous_note: prev.get("lease_note"),
                previous_holder: prev.get("lease_note_holder"),
            })
        }
    }
}

async fn write_lease(conn: &mut SqliteConnection, id: i64, l: &Lease, note: Option<&str>) -> StoreResult<()> {
    sqlx::query(
        "UPDATE items SET lease_holder = ?, lease_user_id = ?, lease_session_id = ?, lease_epoch = ?,
                lease_acquired_at = ?, lease_renewed_at = ?, lease_expires_at = ?, lease_ttl_seconds = ?,
                lease_note = COALESCE(?, lease_note),
                lease_note_holder = CASE WHEN ? IS NULL THEN lease_note_holder ELSE ? END,
                lease_note_lease_id = CASE WHEN ? IS NULL THEN lease_note_lease_id ELSE ? END,
                lease_id = ?
         WHERE id = ?",
    )
    .bind(&l.holder)
    .bind(l.user_id)
    .bind(&l.session_id)
    .bind(l.epoch)
    .bind(micros(l.acquired_at))
    .bind(micros(l.renewed_at))
    .bind(micros(l.expires_at))
    .bind(i64::from(l.ttl_seconds))
    .bind(note)
    .bind(note)
    .bind(&l.holder)
    .bind(note)
    .bind(l.lease_id)
    .bind(l.lease_id)
    .bind(id)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(())
}

/// The frontier predicate and order (L11), appended to a SELECT over `items i`
/// (joined with `users a`).
pub(crate) fn push_frontier(
    qb: &mut QueryBuilder<Sqlite>,
    ws: &Workspace,
    f: &ValidFrontierFilter,
    now: Timestamp,
    limit: u32,
) {
    qb.push(" WHERE i.workspace_id = ").push_bind(ws.id);
    qb.push(" AND i.deleted_at IS NULL AND i.status = 'open'");
    qb.push(" AND (i.lease_holder IS NULL OR i.lease_expires_at <= ").push_bind(micros(now)).push(")");
    // L14, L16: deferred and backing-off items wait.
    qb.push(" AND (i.not_before IS NULL OR i.not_before <= ").push_bind(micros(now)).push(")");
    qb.push(" AND (i.retry_at IS NULL OR i.retry_at <= ").push_bind(micros(now)).push(")");
    for r in &f.exclude {
        qb.push(" AND NOT (i.prefix = ")
            .push_bind(r.prefix.clone())
            .push(" AND i.number = ")
            .push_bind(r.number)
            .push(")");
    }
    qb.push(
        " AND NOT EXISTS (SELECT 1 FROM item_blockers ib JOIN items b ON b.id = ib.blocker_id
           WHERE ib.item_id = i.id AND b.deleted_at IS NULL AND b.status NOT IN ('done', 'cancelled'))",
    );
    push_in(qb, "i.kind", f.kinds.iter().cloned());
    for l in &f.labels {
        qb.push(" AND EXISTS (SELECT 1 FROM json_each(i.labels) WHERE value = ").push_bind(l.clone()).push(")");
    }
    for l in &f.without_labels {
        qb.push(" AND NOT EXISTS (SELECT 1 FROM json_each(i.labels) WHERE value = ").push_bind(l.clone()).push(")");
    }
    if let Some(p) = f.min_priority {
        qb.push(" AND i.priority >= ").push_bind(p.rank());
    }
    if let Some(p) = &f.parent {
        push_parent(qb, ws, p);
    }
    qb.push(" ORDER BY i.priority DESC, i.created_at, i.id LIMIT ")
        .push_bind(i64::from(limit.clamp(1, LIST_LIMIT_MAX)));
}
