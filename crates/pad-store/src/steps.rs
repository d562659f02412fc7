//! The store operations whose control flow does not depend on the backend,
//! written once over the steps each backend provides. A backend implements
//! [`ItemSteps`], [`LeaseSteps`] and [`EventSteps`] for its write transaction
//! (in its `items.rs`, `leases.rs` and `events.rs`), and [`Begin`] for
//! itself; its `Store` methods then call the flows here. What differs
//! between backends — the SQL, the clock, how a row is locked — stays in the
//! steps; what an operation decides and records, and in which order, lives
//! here only.

use async_trait::async_trait;
use pad_core::lease::{self, LeaseEnd, LeaseHandle, LeaseSlot, Terms};
use pad_core::model::ValidNewItem;
use pad_core::model::ValidPatch;
use pad_core::{
    EventKind, FrontierFilter, Item, ItemPatch, ItemRef, Lease, NEEDS_HUMAN, NewItem, Role, Status, Timestamp,
    TokenInfo, User, ValidFrontierFilter, Workspace,
};
use serde_json::{Map, Value};

use crate::shared::{self, event};
mod accounts;
mod import;
pub use accounts::{bootstrap, create_workspace, ensure_user, insert_token, remove_member, set_member};
pub use import::{ImportSteps, import};

use crate::{
    Actor, ClaimOutcome, ClaimRequest, CompleteRequest, FailOutcome, FailRequest, ObservedExpiry, StoreError,
    StoreResult,
};

/// A backend that can open a write transaction.
#[async_trait]
pub trait Begin: Send + Sync {
    type Tx: WriteTx;
    /// Opens a write transaction. On SQLite it holds the write lock and has
    /// read the store's clock; on PostgreSQL rows are locked as they are read.
    async fn begin(&self) -> StoreResult<Self::Tx>;
}

/// A backend's write transaction: everything the flows need. Dropping it
/// without [`commit`](WriteTx::commit) rolls back.
#[async_trait]
pub trait WriteTx: AccountSteps + ItemSteps + LeaseSteps + EventSteps {
    async fn commit(self) -> StoreResult<()>;
    /// Rolls back now, releasing any locks at once.
    async fn rollback(self);
}

/// An item row under this transaction's lock, with the clock read after
/// taking it.
#[derive(Debug)]
pub struct Locked {
    pub id: i64,
    pub deleted: bool,
    pub slot: LeaseSlot,
    pub now: Timestamp,
}

impl Locked {
    /// Deleted items take no leases and no edits.
    pub fn live(self, r: &ItemRef) -> StoreResult<Self> {
        if self.deleted { Err(StoreError::not_found(format!("item {r} (deleted)"))) } else { Ok(self) }
    }
}

/// The steps of account writes (each backend's `accounts.rs`).
#[async_trait]
pub trait AccountSteps: Send {
    /// Holds off other first starts until commit.
    async fn lock_first_start(&mut self) -> StoreResult<()>;
    async fn any_user(&mut self) -> StoreResult<bool>;
    /// The user with this email (stored lower-case), created if needed.
    async fn ensure_user(&mut self, email: &str) -> StoreResult<User>;
    /// `None` when the slug is taken.
    async fn insert_workspace(&mut self, slug: &str, name: &str) -> StoreResult<Option<Workspace>>;
    async fn insert_kind(&mut self, ws: i64, name: &str, prefix: &str) -> StoreResult<()>;
    /// Serializes membership changes of a workspace until commit.
    async fn lock_members(&mut self, ws: i64) -> StoreResult<()>;
    /// Adds a member or changes its role; returns when it was added.
    async fn put_member(&mut self, ws: i64, user: i64, role: Role) -> StoreResult<Timestamp>;
    async fn member_role(&mut self, ws: i64, user: i64) -> StoreResult<Option<Role>>;
    /// The member with this email: its user id and role.
    async fn member_by_email(&mut self, ws: i64, email: &str) -> StoreResult<Option<(i64, Role)>>;
    async fn owners(&mut self, ws: i64) -> StoreResult<i64>;
    /// Removes the member and revokes its tokens scoped to `ws` and those it
    /// minted for others there.
    async fn delete_member(&mut self, ws: i64, user: i64) -> StoreResult<()>;
    /// Serializes token mints of one user until commit.
    async fn lock_tokens(&mut self, user: i64) -> StoreResult<()>;
    async fn live_tokens(&mut self, user: i64) -> StoreResult<i64>;
    async fn insert_token(
        &mut self,
        user: i64,
        name: &str,
        hash: &str,
        scope: Option<(i64, Role)>,
        minted_by: i64,
    ) -> StoreResult<TokenInfo>;
}

/// The steps of item writes (each backend's `items.rs`).
#[async_trait]
pub trait ItemSteps: Send {
    /// Locks the item's row for this transaction (`NotFound` if none).
    async fn lock_item(&mut self, ws: &Workspace, r: &ItemRef) -> StoreResult<Locked>;
    /// Blocker changes in a workspace take turns where writers are not
    /// already serialized, so two updates cannot each add half of a cycle.
    /// Taken before any row lock.
    async fn lock_blockers(&mut self, ws: &Workspace) -> StoreResult<()>;
    async fn load_item(&mut self, id: i64, now: Timestamp) -> StoreResult<Item>;
    /// Takes the kind's next number: its prefix, the number, and the clock
    /// once the kind's counter is held. `None`: no such kind.
    async fn next_number(&mut self, ws: &Workspace, kind: &str) -> StoreResult<Option<(String, i64, Timestamp)>>;
    async fn insert_item(&mut self, ws: &Workspace, new: &NewRow<'_>) -> StoreResult<i64>;
    async fn kind_exists(&mut self, ws: &Workspace, kind: &str) -> StoreResult<bool>;
    /// The id of a live item, or a validation error on `field`.
    async fn item_id(&mut self, ws: &Workspace, field: &str, r: &ItemRef) -> StoreResult<i64>;
    /// The user id of a member, or a validation error on `field`.
    async fn member_id(&mut self, ws: &Workspace, field: &str, email: &str) -> StoreResult<i64>;
    /// Whether `item` is `parent` or one of its ancestors.
    async fn is_ancestor(&mut self, item: i64, parent: i64) -> StoreResult<bool>;
    async fn replace_blockers(&mut self, item: i64, blockers: &[i64]) -> StoreResult<()>;
    /// The `(item, blocker)` links reachable from `item` through blockers,
    /// for [`shared::check_blockers_acyclic`].
    async fn blocker_edges(&mut self, item: i64) -> StoreResult<Vec<(ItemRef, ItemRef)>>;
    /// Writes `new`'s content; returns the new `updated_at`.
    async fn write_content(
        &mut self,
        id: i64,
        new: &Item,
        parent: Option<i64>,
        assignee: Option<i64>,
        now: Timestamp,
    ) -> StoreResult<Timestamp>;
    async fn write_status(&mut self, id: i64, status: Status, now: Timestamp) -> StoreResult<Timestamp>;
    async fn write_deleted(&mut self, id: i64, deleted: bool, now: Timestamp) -> StoreResult<Timestamp>;
    async fn lease_expiries(&mut self, id: i64) -> StoreResult<i64>;
    /// Clears the expiry and failure counts and the backoff, sets `labels`.
    async fn write_requeue(&mut self, id: i64, labels: &[String], now: Timestamp) -> StoreResult<Timestamp>;
    async fn add_label(&mut self, id: i64, label: &str) -> StoreResult<()>;
    /// Appends one history version. The item's row is locked (or new).
    async fn add_version(
        &mut self,
        id: i64,
        actor: Actor,
        changes: Map<String, Value>,
        at: Timestamp,
    ) -> StoreResult<()>;
    /// Returns the comment's id and its author's email.
    async fn insert_comment(
        &mut self,
        item: i64,
        actor: Actor,
        body: &str,
        at: Timestamp,
    ) -> StoreResult<(i64, String)>;
}

/// A new item's row, for [`ItemSteps::insert_item`].
pub struct NewRow<'a> {
    pub v: &'a ValidNewItem,
    pub prefix: &'a str,
    pub number: i64,
    pub parent: Option<i64>,
    pub assignee: Option<i64>,
    pub actor: Actor,
    pub now: Timestamp,
}

/// A frontier item claim-next may take, locked by this transaction.
#[derive(Debug)]
pub struct Candidate {
    pub id: i64,
    pub item_ref: ItemRef,
    /// The recorded lease, which on the frontier has expired.
    pub expired: Option<Lease>,
    pub now: Timestamp,
}

/// One expired lease, counted, to be recorded by [`record_expiry`].
#[derive(Debug)]
pub struct Expiry {
    pub ws: i64,
    pub threshold: u32,
    pub item: i64,
    pub item_ref: ItemRef,
    pub lease: Lease,
    /// The count and labels after the expiry was counted.
    pub expiries: i64,
    pub labels: Vec<String>,
}

/// The steps of lease writes (each backend's `leases.rs`).
#[async_trait]
pub trait LeaseSteps: Send {
    /// L1-L3, L12, L13 on one item: grant or refresh, with the expiry of a
    /// lease found expired recorded first. Returns the clock it decided on.
    async fn claim_item(
        &mut self,
        ws: &Workspace,
        r: &ItemRef,
        req: &ClaimRequest,
        terms: Terms,
    ) -> StoreResult<(ClaimOutcome, Timestamp)>;
    /// L11: the best ready items, locked, in frontier order; empty when none.
    async fn claim_candidates(
        &mut self,
        ws: &Workspace,
        f: &ValidFrontierFilter,
        limit: usize,
    ) -> StoreResult<Vec<Candidate>>;
    /// L5/L13 on a locked row whose lease has expired: the lease becomes the
    /// last lease (ended `expired` at its expiry, L18) and is forgotten, and
    /// the expiry is counted. Returns the count and labels after.
    async fn count_expiry(&mut self, id: i64, now: Timestamp) -> StoreResult<(i64, Vec<String>)>;
    /// Takes up to a batch of expired leases no one has observed, counted
    /// as by [`count_expiry`](Self::count_expiry), each with its workspace's
    /// slug and the clock it was taken at.
    async fn take_expired(&mut self) -> StoreResult<Vec<(Expiry, String, Timestamp)>>;
    /// L18: ends the live lease `how` at `at`; it becomes the last lease.
    async fn end_lease(&mut self, id: i64, how: LeaseEnd, at: Timestamp) -> StoreResult<()>;
    /// L14: the next failure count of a locked row.
    async fn next_failures(&mut self, id: i64) -> StoreResult<i64>;
    /// L12, L14: records a failure (count, backoff, note, `at`); returns the labels.
    async fn write_failure(
        &mut self,
        id: i64,
        failures: i64,
        retry_at: Timestamp,
        note: Option<&str>,
        at: Timestamp,
    ) -> StoreResult<Vec<String>>;
    /// L14: records a success at `at`, after the lease ended: the handoff
    /// note (a failure's, or stale progress) is cleared and any backoff
    /// with it; the failure count and last failure note stay as history.
    async fn record_success(&mut self, id: i64, at: Timestamp) -> StoreResult<()>;
}

/// The event log (each backend's `events.rs`).
#[async_trait]
pub trait EventSteps: Send {
    /// Appends one event, in this transaction.
    async fn event(
        &mut self,
        ws: i64,
        kind: EventKind,
        r: &ItemRef,
        actor: Option<Actor>,
        at: Timestamp,
        data: Value,
    ) -> StoreResult<()>;
}

pub async fn create_item<S: Begin>(s: &S, ws: &Workspace, actor: Actor, new: &NewItem) -> StoreResult<Item> {
    let v = new.validate()?;
    let mut tx = s.begin().await?;
    let item = create_in(&mut tx, ws, actor, &v).await?;
    tx.commit().await?;
    Ok(item)
}

/// An item create inside `tx` (also used by [`import`]).
async fn create_in<T: WriteTx>(tx: &mut T, ws: &Workspace, actor: Actor, v: &ValidNewItem) -> StoreResult<Item> {
    // The kind's counter stays held until commit, so numbers are distinct;
    // a refused create rolls its number back.
    let (prefix, number, now) = tx.next_number(ws, &v.kind).await?.ok_or_else(|| shared::unknown_kind(&v.kind))?;
    let parent = match &v.parent {
        Some(p) => Some(tx.item_id(ws, "parent", p).await?),
        None => None,
    };
    let assignee = match &v.assignee {
        Some(a) => Some(tx.member_id(ws, "assignee", a).await?),
        None => None,
    };
    let row = NewRow { v, prefix: &prefix, number, parent, assignee, actor, now };
    let id = tx.insert_item(ws, &row).await?;
    set_blockers(tx, ws, id, &v.blocked_by).await?;
    let item = tx.load_item(id, now).await?;
    tx.add_version(id, actor, item.changes_since(None), now).await?;
    tx.event(ws.id, EventKind::ItemCreated, &item.item_ref, Some(actor), now, event::created(&item)).await?;
    Ok(item)
}

async fn set_blockers<T: WriteTx>(tx: &mut T, ws: &Workspace, item: i64, blockers: &[ItemRef]) -> StoreResult<()> {
    let mut ids = Vec::with_capacity(blockers.len());
    for (i, b) in blockers.iter().enumerate() {
        ids.push(tx.item_id(ws, &format!("blocked_by[{i}]"), b).await?);
    }
    tx.replace_blockers(item, &ids).await
}

/// A content change: the fence (L10), optimistic concurrency, links and
/// their cycles, one history version and `item.updated`.
pub async fn update_item<S: Begin>(
    s: &S,
    ws: &Workspace,
    actor: Actor,
    r: &ItemRef,
    patch: &ItemPatch,
) -> StoreResult<Item> {
    let p: ValidPatch = patch.validate()?;
    let mut tx = s.begin().await?;
    let (item, changed) = update_in(&mut tx, ws, actor, r, &p).await?;
    if changed {
        tx.commit().await?;
    }
    Ok(item)
}

/// A content change inside `tx` (also used by [`import`]); false when the
/// patch changed nothing (and nothing was written).
async fn update_in<T: WriteTx>(
    tx: &mut T,
    ws: &Workspace,
    actor: Actor,
    r: &ItemRef,
    p: &ValidPatch,
) -> StoreResult<(Item, bool)> {
    if p.blocked_by.is_some() || !p.add_blocked_by.is_empty() || !p.remove_blocked_by.is_empty() {
        tx.lock_blockers(ws).await?;
    }
    let locked = tx.lock_item(ws, r).await?.live(r)?;
    let now = locked.now;
    // L10: the row is locked until commit, so the fence holds for the write.
    let old = tx.load_item(locked.id, now).await?;
    let Some((new, changes)) = shared::plan_update(&locked.slot, &old, p, now)? else { return Ok((old, false)) };
    if new.kind != old.kind && !tx.kind_exists(ws, &new.kind).await? {
        return Err(shared::unknown_kind(&new.kind));
    }
    let parent = match &new.parent {
        Some(pr) => {
            let pid = tx.item_id(ws, "parent", pr).await?;
            // Refuse cycles: the item may not be its new parent's ancestor.
            if tx.is_ancestor(locked.id, pid).await? {
                return Err(StoreError::invalid("parent", format!("{pr} is a descendant of {r}")));
            }
            Some(pid)
        }
        None => None,
    };
    let assignee = match &new.assignee {
        Some(a) => Some(tx.member_id(ws, "assignee", a).await?),
        None => None,
    };
    if new.blocked_by != old.blocked_by {
        set_blockers(tx, ws, locked.id, &new.blocked_by).await?;
        // Blocker changes take turns (lock_blockers, or serialized writers),
        // so no other update can close a cycle between this check and commit.
        shared::check_blockers_acyclic(r, &tx.blocker_edges(locked.id).await?)?;
    }
    let at = tx.write_content(locked.id, &new, parent, assignee, now).await?;
    let data = event::updated(&changes);
    tx.add_version(locked.id, actor, changes, at).await?;
    tx.event(ws.id, EventKind::ItemUpdated, r, Some(actor), at, data).await?;
    let item = tx.load_item(locked.id, now).await?;
    Ok((item, true))
}

/// docs/leases.md, "Requeue".
pub async fn requeue<S: Begin>(s: &S, ws: &Workspace, actor: Actor, r: &ItemRef) -> StoreResult<Item> {
    let mut tx = s.begin().await?;
    let locked = tx.lock_item(ws, r).await?.live(r)?;
    let now = locked.now;
    let old = tx.load_item(locked.id, now).await?;
    let expiries = tx.lease_expiries(locked.id).await?;
    let Some((new, changes)) = shared::plan_requeue(&old, expiries) else { return Ok(old) };
    let at = tx.write_requeue(locked.id, &new.labels, now).await?;
    let data = event::updated(&changes);
    tx.add_version(locked.id, actor, changes, at).await?;
    tx.event(ws.id, EventKind::ItemUpdated, r, Some(actor), at, data).await?;
    let item = tx.load_item(locked.id, now).await?;
    tx.commit().await?;
    Ok(item)
}

/// Soft delete (fenced, L10) or restore.
pub async fn set_deleted<S: Begin>(
    s: &S,
    ws: &Workspace,
    actor: Actor,
    r: &ItemRef,
    fence: LeaseHandle,
    deleted: bool,
) -> StoreResult<Item> {
    let mut tx = s.begin().await?;
    let (item, changed) = set_deleted_in(&mut tx, ws, actor, r, fence, deleted).await?;
    if changed {
        tx.commit().await?;
    }
    Ok(item)
}

/// [`set_deleted`] inside `tx` (also used by [`import`]); false when the
/// item already was so.
async fn set_deleted_in<T: WriteTx>(
    tx: &mut T,
    ws: &Workspace,
    actor: Actor,
    r: &ItemRef,
    fence: LeaseHandle,
    deleted: bool,
) -> StoreResult<(Item, bool)> {
    let locked = tx.lock_item(ws, r).await?;
    let now = locked.now;
    lease::check_fence(&locked.slot, fence, now).map_err(|live| StoreError::lost(live.map(|l| *l), now))?;
    let old = tx.load_item(locked.id, now).await?;
    if locked.deleted == deleted {
        return Ok((old, false));
    }
    let at = tx.write_deleted(locked.id, deleted, now).await?;
    let new = tx.load_item(locked.id, now).await?;
    tx.add_version(locked.id, actor, new.changes_since(Some(&old)), at).await?;
    let kind = if deleted { EventKind::ItemDeleted } else { EventKind::ItemRestored };
    tx.event(ws.id, kind, r, Some(actor), at, serde_json::json!({})).await?;
    Ok((new, true))
}

pub async fn add_comment<S: Begin>(
    s: &S,
    ws: &Workspace,
    actor: Actor,
    r: &ItemRef,
    body: &str,
) -> StoreResult<pad_core::Comment> {
    pad_core::model::validate_comment(body)?;
    let mut tx = s.begin().await?;
    let comment = comment_in(&mut tx, ws, actor, r, body).await?;
    tx.commit().await?;
    Ok(comment)
}

/// A comment inside `tx` (also used by [`import`]).
async fn comment_in<T: WriteTx>(
    tx: &mut T,
    ws: &Workspace,
    actor: Actor,
    r: &ItemRef,
    body: &str,
) -> StoreResult<pad_core::Comment> {
    // Locked so a concurrent delete cannot slip in between check and insert.
    let locked = tx.lock_item(ws, r).await?.live(r)?;
    let (id, author) = tx.insert_comment(locked.id, actor, body, locked.now).await?;
    tx.event(ws.id, EventKind::CommentCreated, r, Some(actor), locked.now, event::commented(id)).await?;
    Ok(pad_core::Comment { id, author, body: body.to_string(), created_at: locked.now })
}

/// L1-L3, L5, L7-L9, L12, L13.
pub async fn claim<S: Begin>(s: &S, ws: &Workspace, r: &ItemRef, req: &ClaimRequest) -> StoreResult<ClaimOutcome> {
    let terms = req.validate(&ws.settings)?;
    let mut tx = s.begin().await?;
    match tx.claim_item(ws, r, req, terms).await {
        Ok((out, _)) => {
            tx.commit().await?;
            Ok(out)
        }
        Err(e) => {
            // A refused claim (L2) is common under contention: let the next
            // claimer have the lock without waiting for the connection's reuse.
            tx.rollback().await;
            Err(e)
        }
    }
}

/// L11: picks the best ready item and claims it, in one transaction.
/// An expired lease found on the way is recorded first; if that
/// quarantines the item and the filter excludes `needs-human`, the item is
/// passed over.
pub async fn claim_next<S: Begin>(
    s: &S,
    ws: &Workspace,
    filter: &FrontierFilter,
    req: &ClaimRequest,
) -> StoreResult<Option<(Item, ClaimOutcome)>> {
    Ok(claim_next_many(s, ws, filter, req, 1).await?.pop())
}

/// L11 for a batch (docs/api.md, "Batches and long polls"): up to `count`
/// of the best ready items, each claimed under its own lease, in one
/// transaction, best first.
pub async fn claim_next_many<S: Begin>(
    s: &S,
    ws: &Workspace,
    filter: &FrontierFilter,
    req: &ClaimRequest,
    count: u32,
) -> StoreResult<Vec<(Item, ClaimOutcome)>> {
    let f = filter.validate()?;
    let terms = req.validate(&ws.settings)?;
    let want = usize::try_from(count).unwrap_or(usize::MAX).max(1);
    let mut tx = s.begin().await?;
    let mut granted = Vec::new();
    'search: while granted.len() < want {
        let candidates = tx.claim_candidates(ws, &f, want - granted.len()).await?;
        if candidates.is_empty() {
            break;
        }
        // Each candidate is either claimed or, quarantined by its expiry,
        // no longer a candidate: the search always moves on.
        for c in candidates {
            if let Some(old) = c.expired {
                let quarantined = expire(&mut tx, ws, c.id, &c.item_ref, old, c.now).await?;
                if quarantined && f.without_labels.iter().any(|l| l == NEEDS_HUMAN) {
                    continue;
                }
            }
            let (out, now) = tx.claim_item(ws, &c.item_ref, req, terms).await?;
            let item = tx.load_item(c.id, now).await?;
            granted.push((item, out));
            if granted.len() == want {
                break 'search;
            }
        }
    }
    tx.commit().await?;
    Ok(granted)
}

/// L5/L13 on a locked row whose lease `old` has expired: counts it and
/// records it. Returns whether that quarantined the item.
pub async fn expire<T: WriteTx>(
    tx: &mut T,
    ws: &Workspace,
    id: i64,
    r: &ItemRef,
    old: Lease,
    now: Timestamp,
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
pub async fn complete<S: Begin>(s: &S, ws: &Workspace, r: &ItemRef, req: &CompleteRequest) -> StoreResult<Item> {
    req.validate()?;
    let claimant = req.claimant();
    let mut tx = s.begin().await?;
    // The row stays locked until commit, so the lease decided on is the one ended.
    let locked = tx.lock_item(ws, r).await?.live(r)?;
    let now = locked.now;
    let lease = match lease::decide_end(&locked.slot, &claimant, req.handle, now) {
        Ok(l) => l,
        Err(e) => return Err(explain_lost(&mut tx, locked.id, req.handle, shared::end_refused(e, now)).await),
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
    let item = tx.load_item(locked.id, now).await?;
    tx.commit().await?;
    Ok(item)
}

/// L14: ends the caller's live lease as failed, counts the failure, keeps
/// the note, sets `retry_at`, and quarantines at the threshold.
pub async fn fail<S: Begin>(s: &S, ws: &Workspace, r: &ItemRef, req: &FailRequest) -> StoreResult<FailOutcome> {
    let threshold = req.validate(&ws.settings)?;
    let claimant = req.claimant();
    let mut tx = s.begin().await?;
    let locked = tx.lock_item(ws, r).await?.live(r)?;
    let now = locked.now;
    let lease = match lease::decide_end(&locked.slot, &claimant, req.handle, now) {
        Ok(l) => l,
        Err(e) => return Err(explain_lost(&mut tx, locked.id, req.handle, shared::end_refused(e, now)).await),
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
    tx.commit().await?;
    Ok(FailOutcome { item, quarantined })
}
