//! The backend-independent steps of store operations. Every backend calls
//! these, so they decide — and describe what they did — the same way; only
//! the SQL differs between backends.

use pad_core::lease::LeaseEnd;
use pad_core::lease::{self, LeaseSlot};
use pad_core::model::{ValidPatch, validate_label};
use pad_core::validate::{self, Lines};
use pad_core::{Item, ItemFilter, ItemRef, LIST_LIMIT_MAX, Lease, NEEDS_HUMAN, Page, Timestamp};
use serde_json::{Map, Value, json};

use crate::{StoreError, StoreResult};

/// Checks a list request and returns the keyset position (the last id of the
/// previous page, 0 for the first) and the clamped page size.
pub fn list_window(filter: &ItemFilter, limit: u32, cursor: Option<&str>) -> StoreResult<(i64, u32)> {
    let after = parse_cursor(cursor)?.unwrap_or(0);
    for (i, l) in filter.labels.iter().enumerate() {
        validate_label(&format!("label[{i}]"), l)?;
    }
    if let Some(q) = &filter.q {
        validate::text("q", q, 1, 200, Lines::Single)?;
    }
    Ok((after, limit.clamp(1, LIST_LIMIT_MAX)))
}

/// Checks a page request of history or comments: the entry id the previous
/// page ended at (`None` for the first page) and the page size, clamped to
/// `1..=max`.
pub fn page_window(limit: u32, cursor: Option<&str>, max: u32) -> StoreResult<(Option<i64>, u32)> {
    Ok((parse_cursor(cursor)?, limit.clamp(1, max)))
}

/// A keyset cursor: the id a previous page ended at, as that page gave it.
fn parse_cursor(cursor: Option<&str>) -> StoreResult<Option<i64>> {
    cursor
        .map(|c| {
            c.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
                StoreError::invalid("cursor", "must be the next_cursor a previous page of this list returned")
            })
        })
        .transpose()
}

/// One page of history or comments from the `limit + 1` entries read:
/// at most `limit`, and no more once `PAGE_BYTES_MAX` bytes are held
/// (`id_and_bytes`: an entry's id and size), always at least one. Its
/// cursor is the last entry's id, when entries remain.
pub fn bounded_page<T>(rows: Vec<T>, limit: u32, id_and_bytes: impl Fn(&T) -> (i64, usize)) -> Page<T> {
    let (mut items, mut bytes, mut last) = (Vec::new(), 0usize, 0i64);
    let more = rows.len() > limit as usize;
    for row in rows.into_iter().take(limit as usize) {
        let (id, n) = id_and_bytes(&row);
        if !items.is_empty() && bytes + n > pad_core::api::PAGE_BYTES_MAX {
            return Page { items, next_cursor: Some(last.to_string()) };
        }
        (bytes, last) = (bytes + n, id);
        items.push(row);
    }
    Page { items, next_cursor: more.then(|| last.to_string()) }
}

/// Cuts one page from the rows of a list query that asked for `limit + 1`
/// (see [`list_window`]): the first `limit` items, and the cursor of the
/// next page when there is one. `read` gives a row's id and item.
pub fn page<R>(rows: &[R], limit: u32, read: impl Fn(&R) -> StoreResult<(i64, Item)>) -> StoreResult<Page<Item>> {
    let mut items = Vec::with_capacity(rows.len());
    let mut last_id = 0;
    for row in rows.iter().take(limit as usize) {
        let (id, item) = read(row)?;
        last_id = id;
        items.push(item);
    }
    let next_cursor = (rows.len() > limit as usize).then(|| last_id.to_string());
    Ok(Page { items, next_cursor })
}

/// Decides an update of `old` (whose lease slot is `slot`) at `now`: the
/// fence (L10), optimistic concurrency, the patch itself. `None` means the
/// patch changes nothing, so nothing is written and no version is added.
pub fn plan_update(
    slot: &LeaseSlot, old: &Item, patch: &ValidPatch, now: Timestamp,
) -> StoreResult<Option<(Item, Map<String, Value>)>> {
    lease::check_fence(slot, patch.fence, now).map_err(|live| StoreError::lost(live.map(|l| *l), now))?;
    if let Some(expected) = patch.expected_updated_at
        && expected != old.updated_at
    {
        return Err(StoreError::UpdateConflict { expected, actual: old.updated_at });
    }
    let new = old.patched(patch)?;
    let changes = new.changes_since(Some(old));
    Ok((!changes.is_empty()).then_some((new, changes)))
}

/// A requeue (docs/leases.md, "Requeue"): the item without `needs-human`,
/// failures and backoff cleared; `None` when there is nothing to clear. The
/// history entry names the counts it cleared under `requeued`.
pub fn plan_requeue(old: &Item, expiries: i64) -> Option<(Item, Map<String, Value>)> {
    let quarantined = old.labels.iter().any(|l| l == NEEDS_HUMAN);
    if !quarantined && expiries == 0 && old.failures == 0 && old.retry_at.is_none() {
        return None;
    }
    let mut new = old.clone();
    new.labels.retain(|l| l != NEEDS_HUMAN);
    new.failures = 0;
    new.retry_at = None;
    let mut changes = new.changes_since(Some(old));
    changes.insert("requeued".into(), json!({ "expiries": expiries, "failures": old.failures }));
    Some((new, changes))
}

/// A refused complete or fail (L14, L15) as the store's error.
pub fn end_refused(e: lease::EndRefusal, now: Timestamp) -> StoreError {
    match e {
        lease::EndRefusal::Lost(live) => StoreError::lost(live.map(|l| *l), now),
        lease::EndRefusal::Held(l) => StoreError::held(*l, now),
    }
}

/// Refuses `blocked_by` links that would close a cycle: items in a cycle
/// wait on each other forever and never reach the frontier (docs/api.md,
/// "Items"). `edges` are the workspace's `(item, blocker)` links reachable
/// from `item` through its blockers, with the item's new blockers already
/// among them; the backend finds them, this decides. The message names the
/// cycle from the item back to itself.
///
/// Only an update can close a cycle: a new item's blockers already exist,
/// and none of them can be waiting on an item that did not.
pub fn check_blockers_acyclic(item: &ItemRef, edges: &[(ItemRef, ItemRef)]) -> StoreResult<()> {
    let mut blockers: std::collections::HashMap<&ItemRef, Vec<&ItemRef>> = std::collections::HashMap::new();
    for (from, to) in edges {
        blockers.entry(from).or_default().push(to);
    }
    blocker_cycle(item, |at| blockers.get(at).into_iter().flatten().copied())
}

/// [`check_blockers_acyclic`] over a graph given as each item's blockers
/// (an import keeps its own: docs/api.md, "Import"). Breadth first from
/// the item, remembering how each item was reached, so the cycle reported
/// is a shortest one; each item and link is looked at once.
pub fn blocker_cycle<'a, I>(item: &'a ItemRef, blockers_of: impl Fn(&'a ItemRef) -> I) -> StoreResult<()>
where
    I: IntoIterator<Item = &'a ItemRef>,
{
    use std::collections::{HashMap, VecDeque};
    let mut reached_from: HashMap<&ItemRef, &ItemRef> = HashMap::new();
    let mut queue = VecDeque::from([item]);
    while let Some(at) = queue.pop_front() {
        for blocker in blockers_of(at) {
            if blocker == item {
                let mut path = vec![item, at];
                let mut step = at;
                while step != item {
                    step = reached_from[step];
                    path.push(step);
                }
                path.reverse();
                let shown: Vec<String> = path.iter().map(|r| r.to_string()).collect();
                return Err(StoreError::invalid(
                    "blocked_by",
                    format!(
                        "would create a cycle: {} (items in a cycle wait on each other forever)",
                        shown.join(" → ")
                    ),
                ));
            }
            if !reached_from.contains_key(blocker) {
                reached_from.insert(blocker, at);
                queue.push_back(blocker);
            }
        }
    }
    Ok(())
}

/// Refuses `parent` as `item`'s new parent when `item` is `parent` or one
/// of its ancestors; the one message for every backend.
pub fn parent_cycle(item: &ItemRef, parent: &ItemRef) -> StoreError {
    StoreError::invalid("parent", format!("{parent} is a descendant of {item}"))
}

pub fn unknown_kind(kind: &str) -> StoreError {
    StoreError::invalid("kind", format!("{kind:?} is not a kind of this workspace"))
}

/// The `data` of each event type (docs/api.md, Events), one shape for every backend.
pub mod event {
    use super::*;

    pub fn created(item: &Item) -> Value {
        json!({ "title": item.title })
    }

    pub fn updated(changes: &Map<String, Value>) -> Value {
        json!({ "fields": changes.keys().collect::<Vec<_>>() })
    }

    pub fn commented(comment_id: i64) -> Value {
        json!({ "comment_id": comment_id })
    }

    pub fn claimed(l: &Lease) -> Value {
        json!({
            "holder": l.holder, "session_id": l.session_id, "epoch": l.epoch, "lease_id": l.lease_id,
            "expires_at": l.expires_at,
        })
    }

    /// `lease.released` and `lease.broken`; `ended` says how (L18).
    pub fn ended(l: &Lease, ended: LeaseEnd, reason: Option<&str>) -> Value {
        json!({ "holder": l.holder, "epoch": l.epoch, "lease_id": l.lease_id, "reason": reason, "ended": ended })
    }

    /// `lease.failed` (L14).
    pub fn failed(l: &Lease, failures: i64, retry_at: Timestamp, note: Option<&str>) -> Value {
        json!({
            "holder": l.holder, "epoch": l.epoch, "lease_id": l.lease_id,
            "failures": failures, "retry_at": retry_at, "note": note,
        })
    }

    /// `item.quarantined` by failures (L14).
    pub fn quarantined_failures(failures: i64) -> Value {
        json!({
            "failures": failures,
            "reason": format!(
                "it failed {failures} times; labelled {NEEDS_HUMAN} so autonomous workers skip it"
            ),
        })
    }

    /// A lease that reached its cap (L19) says so: `"cause": "max_hold"`.
    pub fn expired(l: &Lease) -> Value {
        let mut data = json!({ "holder": l.holder, "epoch": l.epoch, "expired_at": l.expires_at });
        if l.is_capped() {
            data["cause"] = json!("max_hold");
            data["hold_until"] = json!(l.hold_until);
        }
        data
    }

    pub fn quarantined(expiries: i64) -> Value {
        json!({
            "expiries": expiries,
            "reason": format!(
                "its lease expired {expiries} times without a release; labelled {NEEDS_HUMAN} so autonomous workers skip it"
            ),
        })
    }
}

/// The refusal past `TOKENS_PER_USER_MAX` live tokens (docs/api.md, "Tokens").
pub fn too_many_tokens(live: i64) -> StoreResult<()> {
    if live >= pad_core::authz::TOKENS_PER_USER_MAX {
        return Err(StoreError::invalid(
            "tokens",
            format!(
                "this user already has {live} live tokens, the most one user may hold ({}); revoke one first (pad token list, pad token revoke ID)",
                pad_core::authz::TOKENS_PER_USER_MAX
            ),
        ));
    }
    Ok(())
}

/// A crash-test hook: when `PAD_FAILPOINT` names `point`, the process says so
/// on stderr and then hangs, so a test can kill it with SIGKILL exactly
/// there (docs/reliability.md, "First start"). Unset, it costs one env read.
pub fn failpoint(point: &str) {
    if std::env::var("PAD_FAILPOINT").is_ok_and(|p| p == point) {
        eprintln!("pad: failpoint {point} reached");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> ItemRef {
        s.parse().unwrap()
    }

    fn edges(pairs: &[(&str, &str)]) -> Vec<(ItemRef, ItemRef)> {
        pairs.iter().map(|(a, b)| (r(a), r(b))).collect()
    }

    #[test]
    fn a_blocker_cycle_is_refused_naming_it() {
        let e =
            check_blockers_acyclic(&r("TASK-1"), &edges(&[("TASK-1", "TASK-2"), ("TASK-2", "TASK-1")])).unwrap_err();
        let StoreError::Validation(v) = e else { panic!("{e:?}") };
        assert_eq!(v.field, "blocked_by");
        assert!(v.message.starts_with("would create a cycle: TASK-1 → TASK-2 → TASK-1"), "{}", v.message);

        let long = edges(&[("TASK-1", "BUG-7"), ("BUG-7", "TASK-3"), ("TASK-3", "TASK-4"), ("TASK-3", "TASK-1")]);
        let StoreError::Validation(v) = check_blockers_acyclic(&r("TASK-1"), &long).unwrap_err() else { panic!() };
        assert!(v.message.contains("TASK-1 → BUG-7 → TASK-3 → TASK-1"), "{}", v.message);
    }

    #[test]
    fn chains_and_diamonds_are_not_cycles() {
        let dag = edges(&[("TASK-1", "TASK-2"), ("TASK-1", "TASK-3"), ("TASK-2", "TASK-4"), ("TASK-3", "TASK-4")]);
        assert!(check_blockers_acyclic(&r("TASK-1"), &dag).is_ok());
        // A cycle elsewhere that the item does not lead back into is not this item's.
        let elsewhere = edges(&[("TASK-1", "TASK-2"), ("TASK-2", "TASK-3"), ("TASK-3", "TASK-2")]);
        assert!(check_blockers_acyclic(&r("TASK-1"), &elsewhere).is_ok());
        assert!(check_blockers_acyclic(&r("TASK-1"), &[]).is_ok());
    }
}
