//! The item write flows: create, update, requeue, delete and restore,
//! comment. Each `*_in` half runs inside a transaction it is given, so an
//! import can run many in one.

use pad_core::lease::{self, LeaseHandle};
use pad_core::model::{ValidNewItem, ValidPatch};
use pad_core::{EventKind, Item, ItemPatch, ItemRef, NewItem, Workspace};

use super::{Begin, EventSteps, ItemSteps, NewRow, WriteTx, finish};
use crate::shared::{self, event};
use crate::{Actor, StoreError, StoreResult};

pub async fn create_item<S: Begin>(s: &S, ws: &Workspace, actor: Actor, new: &NewItem) -> StoreResult<Item> {
    let v = new.validate()?;
    let mut tx = s.begin().await?;
    let item = create_in(&mut tx, ws, actor, &v).await?;
    tx.commit().await?;
    Ok(item)
}

/// An item create inside `tx` (also used by [`import`]).
pub(super) async fn create_in<T: WriteTx>(
    tx: &mut T, ws: &Workspace, actor: Actor, v: &ValidNewItem,
) -> StoreResult<Item> {
    // What the new row names is looked up before its number is taken: the
    // kind's counter stays held until commit, so numbers are distinct and a
    // refused create rolls its number back, and creations of one kind queue
    // on it; it is held for the writes alone (docs/operations.md, "Item
    // numbers are taken one at a time").
    let parent = match &v.parent {
        Some(p) => Some(tx.item_id(ws, "parent", p).await?),
        None => None,
    };
    let assignee = match &v.assignee {
        Some(a) => Some(tx.member_id(ws, "assignee", a).await?),
        None => None,
    };
    let blockers = blocker_ids(tx, ws, &v.blocked_by).await?;
    let (prefix, number, now) = tx.next_number(ws, &v.kind).await?.ok_or_else(|| shared::unknown_kind(&v.kind))?;
    let row = NewRow { v, prefix: &prefix, number, parent, assignee, actor, now };
    let id = tx.insert_item(ws, &row).await?;
    // A new item has no blockers to replace.
    if !blockers.is_empty() {
        tx.replace_blockers(id, &blockers).await?;
    }
    let item = tx.load_item(id, now).await?;
    tx.add_version(id, actor, item.changes_since(None), now).await?;
    tx.event(ws.id, EventKind::ItemCreated, &item.item_ref, Some(actor), now, event::created(&item)).await?;
    Ok(item)
}

async fn set_blockers<T: WriteTx>(tx: &mut T, ws: &Workspace, item: i64, blockers: &[ItemRef]) -> StoreResult<()> {
    let ids = blocker_ids(tx, ws, blockers).await?;
    tx.replace_blockers(item, &ids).await
}

/// The ids of the items `blockers` names, each refused by its place in the list.
async fn blocker_ids<T: WriteTx>(tx: &mut T, ws: &Workspace, blockers: &[ItemRef]) -> StoreResult<Vec<i64>> {
    let mut ids = Vec::with_capacity(blockers.len());
    for (i, b) in blockers.iter().enumerate() {
        ids.push(tx.item_id(ws, &format!("blocked_by[{i}]"), b).await?);
    }
    Ok(ids)
}

/// A content change: the fence (L10), optimistic concurrency, links and
/// their cycles, one history version and `item.updated`.
pub async fn update_item<S: Begin>(
    s: &S, ws: &Workspace, actor: Actor, r: &ItemRef, patch: &ItemPatch,
) -> StoreResult<Item> {
    let p: ValidPatch = patch.validate()?;
    let mut tx = s.begin().await?;
    let updated = update_in(&mut tx, ws, actor, r, &p, Cycles::Walk).await;
    finish(tx, updated).await
}

/// Who makes sure an update's links close no cycle.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Cycles {
    /// The update walks the workspace's links in the store.
    Walk,
    /// Its caller has, in memory: an import, whose items are all new, so the
    /// file's links are all the links they have (docs/api.md, "Import").
    Checked,
}

/// A content change inside `tx` (also used by [`import`]); false when the
/// patch changed nothing (and nothing was written).
pub(super) async fn update_in<T: WriteTx>(
    tx: &mut T, ws: &Workspace, actor: Actor, r: &ItemRef, p: &ValidPatch, cycles: Cycles,
) -> StoreResult<(Item, bool)> {
    if p.blocked_by.is_some() || !p.add_blocked_by.is_empty() || !p.remove_blocked_by.is_empty() {
        tx.lock_blockers(ws).await?;
    }
    let locked = tx.lock_item(ws, r).await?.undeleted(r)?;
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
            if cycles == Cycles::Walk && tx.is_ancestor(locked.id, pid).await? {
                return Err(shared::parent_cycle(r, pr));
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
        if cycles == Cycles::Walk {
            shared::check_blockers_acyclic(r, &tx.blocker_edges(locked.id).await?)?;
        }
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
    let locked = tx.lock_item(ws, r).await?.undeleted(r)?;
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
    s: &S, ws: &Workspace, actor: Actor, r: &ItemRef, fence: LeaseHandle, deleted: bool,
) -> StoreResult<Item> {
    let mut tx = s.begin().await?;
    let set = set_deleted_in(&mut tx, ws, actor, r, fence, deleted).await;
    finish(tx, set).await
}

/// [`set_deleted`] inside `tx` (also used by [`import`]); false when the
/// item already was so.
pub(super) async fn set_deleted_in<T: WriteTx>(
    tx: &mut T, ws: &Workspace, actor: Actor, r: &ItemRef, fence: LeaseHandle, deleted: bool,
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
    s: &S, ws: &Workspace, actor: Actor, r: &ItemRef, body: &str,
) -> StoreResult<pad_core::Comment> {
    pad_core::model::validate_comment(body)?;
    let mut tx = s.begin().await?;
    let comment = comment_in(&mut tx, ws, actor, r, body).await?;
    tx.commit().await?;
    Ok(comment)
}

/// A comment inside `tx` (also used by [`import`]).
pub(super) async fn comment_in<T: WriteTx>(
    tx: &mut T, ws: &Workspace, actor: Actor, r: &ItemRef, body: &str,
) -> StoreResult<pad_core::Comment> {
    // Locked so a concurrent delete cannot slip in between check and insert.
    let locked = tx.lock_item(ws, r).await?.undeleted(r)?;
    let (id, author) = tx.insert_comment(locked.id, actor, body, locked.now).await?;
    tx.event(ws.id, EventKind::CommentCreated, r, Some(actor), locked.now, event::commented(id)).await?;
    Ok(pad_core::Comment { id, author, body: body.to_string(), created_at: locked.now })
}
