//! The lease write flows that are the same on every backend: claim,
//! claim-next, expiry recording, complete and fail (docs/leases.md).

use pad_core::lease::{self, LeaseEnd, LeaseHandle};
use pad_core::{EventKind, FrontierFilter, Item, ItemRef, Lease, NEEDS_HUMAN, Timestamp, Workspace};

use super::{Begin, EventSteps, Expiry, ItemSteps, LeaseSteps, WriteTx, finish};
use crate::shared::{self, event};
use crate::{
    ClaimOutcome, ClaimRequest, CompleteRequest, FailOutcome, FailRequest, ObservedExpiry, StoreError, StoreResult,
};

/// L1-L3, L5, L7-L9, L12, L13.
pub async fn claim<S: Begin + ?Sized>(
    s: &S, ws: &Workspace, r: &ItemRef, req: &ClaimRequest,
) -> StoreResult<ClaimOutcome> {
    let terms = req.validate(&ws.settings)?;
    let mut tx = s.begin().await?;
    // A refused claim (L2), common under contention, rolls back at once: the
    // next claimer has the lock without waiting for the connection's reuse.
    let claimed = tx.claim_item(ws, r, req, terms).await;
    finish(tx, claimed.map(|c| (c.outcome, true))).await
}

/// L11 for a batch (docs/api.md, "Batches and long polls"): up to `count`
/// of the best ready items, each claimed under its own lease, in one
/// transaction, best first.
/// An expired lease found on the way is recorded first; if that
/// quarantines the item and the filter excludes `needs-human`, the item is
/// passed over.
pub async fn claim_next_many<S: Begin + ?Sized>(
    s: &S, ws: &Workspace, filter: &FrontierFilter, req: &ClaimRequest, count: u32,
) -> StoreResult<Vec<(Item, ClaimOutcome)>> {
    let mut tx = s.begin().await?;
    let granted = claim_next_in(&mut tx, ws, filter, req, count).await?;
    tx.commit().await?;
    Ok(granted)
}

/// [`claim_next_many`] inside a transaction the caller commits (or shares
/// with other lease calls: docs/leases.md, "Lease calls that share a
/// transaction"). On an error the caller must roll back: a recorded expiry
/// may have been written.
pub async fn claim_next_in<T: WriteTx>(
    tx: &mut T, ws: &Workspace, filter: &FrontierFilter, req: &ClaimRequest, count: u32,
) -> StoreResult<Vec<(Item, ClaimOutcome)>> {
    let f = filter.validate()?;
    let terms = req.validate(&ws.settings)?;
    let want = usize::try_from(count).unwrap_or(usize::MAX).max(1);
    let mut granted = Vec::new();
    'search: while granted.len() < want {
        let candidates = tx.claim_candidates(ws, &f, want - granted.len(), req, terms).await?;
        if candidates.is_empty() {
            break;
        }
        // Each candidate is either claimed or, quarantined by its expiry,
        // no longer a candidate: the search always moves on.
        for c in candidates {
            if let Some(grant) = c.granted {
                granted.push(grant);
                if granted.len() == want {
                    break 'search;
                }
                continue;
            }
            if let Some(old) = c.expired {
                let quarantined = expire(tx, ws, c.id, &c.item_ref, old, c.now).await?;
                if quarantined && f.without_labels.iter().any(|l| l == NEEDS_HUMAN) {
                    continue;
                }
            }
            let claimed = tx.claim_item(ws, &c.item_ref, req, terms).await?;
            let item = match claimed.item {
                Some(item) => item,
                None => tx.load_item(c.id, claimed.now).await?,
            };
            granted.push((item, claimed.outcome));
            if granted.len() == want {
                break 'search;
            }
        }
    }
    Ok(granted)
}

/// L5/L13 on a locked row whose lease `old` has expired: counts it and
/// records it. Returns whether that quarantined the item.
pub async fn expire<T: WriteTx>(
    tx: &mut T, ws: &Workspace, id: i64, r: &ItemRef, old: Lease, now: Timestamp,
) -> StoreResult<bool> {
    let (expiries, labels) = tx.count_expiry(id, now).await?;
    let e = Expiry {
        ws: ws.id,
        threshold: ws.settings.quarantine_after_expiries,
        item: id,
        item_ref: r.clone(),
        lease: old,
        expiries,
        labels,
    };
    record_expiry(tx, &e, now).await
}

/// L5/L13: the `lease.expired` event of an expiry already counted, and
/// quarantine (`needs-human` and an event saying why) when the count
/// reaches the workspace's threshold. Returns whether it quarantined.
pub async fn record_expiry<T: ItemSteps + EventSteps>(tx: &mut T, e: &Expiry, now: Timestamp) -> StoreResult<bool> {
    let data = event::expired(&e.lease);
    tx.event(e.ws, EventKind::LeaseExpired, &e.item_ref, None, now, data).await?;
    if !lease::should_quarantine(e.expiries, e.threshold, &e.labels) {
        return Ok(false);
    }
    tx.add_label(e.item, NEEDS_HUMAN).await?;
    tx.event(e.ws, EventKind::ItemQuarantined, &e.item_ref, None, now, event::quarantined(e.expiries)).await?;
    Ok(true)
}

/// L5/L13: records every lease that has expired but not yet been observed.
pub async fn observe_expiries<S: Begin>(s: &S) -> StoreResult<Vec<ObservedExpiry>> {
    let mut tx = s.begin().await?;
    let expired = tx.take_expired().await?;
    let mut observed = Vec::with_capacity(expired.len());
    for (e, workspace, now) in &expired {
        let quarantined = record_expiry(&mut tx, e, *now).await?;
        observed.push(ObservedExpiry {
            workspace: workspace.clone(),
            held: e.lease.expires_at - e.lease.acquired_at,
            quarantined,
        });
    }
    tx.commit().await?;
    Ok(observed)
}

/// A `lease_lost` refusal, with the caller's own lease as it ended when the
/// item's last lease is the one `handle` names (docs/leases.md L7, "Told
/// why"). The refusal stands even if that cannot be read.
pub async fn explain_lost<T: ItemSteps>(tx: &mut T, item: i64, handle: LeaseHandle, e: StoreError) -> StoreError {
    let StoreError::LeaseLost { now, .. } = &e else { return e };
    match tx.load_item(item, *now).await {
        Ok(found) => e.with_ended(found.last_lease, handle),
        Err(_) => e,
    }
}

/// L15: sets the status and ends the caller's live lease in one transaction.
pub async fn complete<S: Begin + ?Sized>(
    s: &S, ws: &Workspace, r: &ItemRef, req: &CompleteRequest,
) -> StoreResult<Item> {
    req.validate()?;
    let mut tx = s.begin().await?;
    let completed = complete_in(&mut tx, ws, r, req).await;
    finish(tx, completed.map(|i| (i, true))).await
}

/// [`complete`] inside `tx`; on an error the caller must roll back.
async fn complete_in<T: WriteTx>(tx: &mut T, ws: &Workspace, r: &ItemRef, req: &CompleteRequest) -> StoreResult<Item> {
    let claimant = req.claimant();
    // The row stays locked until commit, so the lease decided on is the one ended.
    let locked = tx.lock_item(ws, r).await?.undeleted(r)?;
    let now = locked.now;
    let lease = match lease::decide_end(&locked.slot, &claimant, req.handle, now) {
        Ok(l) => l,
        Err(e) => return Err(explain_lost(tx, locked.id, req.handle, shared::end_refused(e, now)).await),
    };
    let old = tx.load_item(locked.id, now).await?;
    if old.status != req.status {
        // A content change like any update: one version, `updated_at` moves.
        let new = Item { status: req.status, ..old.clone() };
        let changes = new.changes_since(Some(&old));
        let at = tx.write_status(locked.id, req.status, now).await?;
        let data = event::updated(&changes);
        tx.add_version(locked.id, req.actor, changes, at).await?;
        tx.event(ws.id, EventKind::ItemUpdated, r, Some(req.actor), at, data).await?;
    }
    tx.end_lease(locked.id, LeaseEnd::Completed, now).await?;
    tx.record_success(locked.id, now).await?;
    let data = event::ended(&lease, LeaseEnd::Completed, None);
    tx.event(ws.id, EventKind::LeaseReleased, r, Some(req.actor), now, data).await?;
    tx.load_item(locked.id, now).await
}

/// L14: ends the caller's live lease as failed, counts the failure, keeps
/// the note, sets `retry_at`, and quarantines at the threshold.
pub async fn fail<S: Begin + ?Sized>(
    s: &S, ws: &Workspace, r: &ItemRef, req: &FailRequest,
) -> StoreResult<FailOutcome> {
    let mut tx = s.begin().await?;
    let failed = fail_in(&mut tx, ws, r, req).await;
    finish(tx, failed.map(|f| (f, true))).await
}

/// [`fail`] inside a transaction the caller commits or shares; on an error
/// it must roll back.
pub async fn fail_in<T: WriteTx>(
    tx: &mut T, ws: &Workspace, r: &ItemRef, req: &FailRequest,
) -> StoreResult<FailOutcome> {
    let threshold = req.validate(&ws.settings)?;
    let claimant = req.claimant();
    let locked = tx.lock_item(ws, r).await?.undeleted(r)?;
    let now = locked.now;
    let lease = match lease::decide_end(&locked.slot, &claimant, req.handle, now) {
        Ok(l) => l,
        Err(e) => return Err(explain_lost(tx, locked.id, req.handle, shared::end_refused(e, now)).await),
    };
    let failures = tx.next_failures(locked.id).await?;
    let st = &ws.settings;
    let retry_at = now + lease::retry_backoff(failures, st.retry_backoff_base_seconds, st.retry_backoff_max_seconds);
    // The note is the lease's handoff note (L12) and the last failure's.
    let labels = tx.write_failure(locked.id, failures, retry_at, req.note.as_deref(), now).await?;
    tx.end_lease(locked.id, LeaseEnd::Failed, now).await?;
    let data = event::failed(&lease, failures, retry_at, req.note.as_deref());
    tx.event(ws.id, EventKind::LeaseFailed, r, Some(req.actor), now, data).await?;
    let quarantined = lease::should_quarantine(failures, threshold, &labels);
    if quarantined {
        tx.add_label(locked.id, NEEDS_HUMAN).await?;
        let data = event::quarantined_failures(failures);
        tx.event(ws.id, EventKind::ItemQuarantined, r, None, now, data).await?;
    }
    let item = tx.load_item(locked.id, now).await?;
    Ok(FailOutcome { item, quarantined })
}
