//! One lease from grant to release (docs/leases.md L1–L10, L17): who wins a
//! claim, what contention says, renewals, release and breaks, the TTL's
//! bounds, that leases leave content alone, fencing by epoch and lease id.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use pad_core::lease::{LeaseEnd, LeaseHandle};
use pad_core::{ItemFilter, ItemPatch};
use pad_store::{ClaimRequest, ReleaseRequest, RenewRequest, Store, StoreError};

use super::{Fixture, held_by, lost, pass, rf};

pub async fn l1_grant_sets_times_and_first_epoch(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let out = f.store.claim(&f.ws, &rf("task-1"), &f.claim("runner-a", 60)).await.unwrap();
    assert!(!out.refreshed);
    let l = out.lease;
    assert_eq!((l.holder.as_str(), l.epoch, l.ttl_seconds), ("runner-a", 1, 60));
    assert_eq!(l.acquired_at, l.renewed_at);
    assert_eq!(l.expires_at, l.acquired_at + chrono::Duration::seconds(60));
    let now = f.store.now().await.unwrap();
    assert!(l.acquired_at <= now && now - l.acquired_at < chrono::Duration::seconds(5), "store clock");
    assert_eq!(f.get("TASK-1").await.lease, Some(l));
}

/// L1: 64 concurrent claimers on one item, 50 rounds, exactly one winner each.
pub async fn l1_concurrent_claimers_have_exactly_one_winner(store: Arc<dyn Store>) {
    let f = Arc::new(Fixture::new(store).await);
    for round in 0..50 {
        let item = f.item(&format!("race {round}")).await;
        let r = item.item_ref.clone();
        let tasks: Vec<_> = (0..64)
            .map(|i| {
                let f = f.clone();
                let r = r.clone();
                tokio::spawn(async move { f.store.claim(&f.ws, &r, &f.claim(&format!("w{i}"), 60)).await })
            })
            .collect();
        let mut winners = Vec::new();
        let mut named = HashSet::new();
        for t in futures::future::join_all(tasks).await {
            match t.unwrap() {
                Ok(out) => {
                    assert!(!out.refreshed);
                    winners.push(out.lease.holder);
                }
                Err(e) => {
                    named.insert(held_by(e));
                }
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        assert!(named.iter().all(|h| *h == winners[0]), "round {round}: losers saw {named:?}, winner {}", winners[0]);
        assert_eq!(f.get(&r.to_string()).await.lease.unwrap().holder, winners[0]);
    }
}

pub async fn l2_contention_names_the_live_lease(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let mut req = f.claim("runner-a", 120);
    req.session_id = Some("s-1".into());
    let won = f.store.claim(&f.ws, &rf("TASK-1"), &req).await.unwrap().lease;
    match f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-b", 60)).await {
        Err(StoreError::LeaseHeld { lease, now }) => {
            assert_eq!(*lease, won);
            assert_eq!(lease.session_id.as_deref(), Some("s-1"));
            let secs = lease.expires_in_seconds(now);
            assert!((118..=120).contains(&secs), "{secs}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(f.get("TASK-1").await.lease, Some(won));
}

pub async fn l3_refresh_keeps_acquired_at_and_epoch(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let first = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 60)).await.unwrap().lease;
    pass(Duration::from_millis(20)).await;
    let out = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 300)).await.unwrap();
    assert!(out.refreshed);
    let l = out.lease;
    assert_eq!((l.epoch, l.acquired_at), (first.epoch, first.acquired_at));
    assert!(l.renewed_at > first.renewed_at);
    assert_eq!(l.expires_at, l.renewed_at + chrono::Duration::seconds(300));
    assert_eq!(l.ttl_seconds, 300);
}

pub async fn l3_same_holder_other_session_is_contention(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let mut a = f.claim("runner-a", 60);
    a.session_id = Some("run-1".into());
    f.store.claim(&f.ws, &rf("TASK-1"), &a).await.unwrap();
    a.session_id = Some("run-2".into());
    assert_eq!(held_by(f.store.claim(&f.ws, &rf("TASK-1"), &a).await.unwrap_err()), "runner-a");
    // No session id against one that has one is another worker too.
    a.session_id = None;
    assert!(matches!(f.store.claim(&f.ws, &rf("TASK-1"), &a).await, Err(StoreError::LeaseHeld { .. })));
}

pub async fn l4_renew_extends_only_a_live_lease_with_its_epoch(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 60)).await.unwrap().lease;
    let mut req = f.renew("runner-a", l.epoch);
    req.ttl_seconds = Some(600);
    let renewed = f.store.renew(&f.ws, &rf("TASK-1"), &req).await.unwrap();
    assert_eq!((renewed.epoch, renewed.acquired_at, renewed.ttl_seconds), (l.epoch, l.acquired_at, 600));
    assert_eq!(renewed.expires_at, renewed.renewed_at + chrono::Duration::seconds(600));
    // A stale epoch: lease_lost with the current lease, nothing changed.
    match f.store.renew(&f.ws, &rf("TASK-1"), &f.renew("runner-a", l.epoch + 1)).await {
        Err(StoreError::LeaseLost { current, .. }) => assert_eq!(current.as_deref(), Some(&renewed)),
        other => panic!("{other:?}"),
    }
    assert_eq!(f.get("TASK-1").await.lease, Some(renewed));
    // Renewing without a TTL keeps the lease's own.
    let again = f.store.renew(&f.ws, &rf("TASK-1"), &f.renew("runner-a", l.epoch)).await.unwrap();
    assert_eq!(again.ttl_seconds, 600);
}

pub async fn l4_renew_after_expiry_is_lost(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 1)).await.unwrap().lease;
    pass(Duration::from_millis(1100)).await;
    match f.store.renew(&f.ws, &rf("TASK-1"), &f.renew("runner-a", l.epoch)).await {
        Err(StoreError::LeaseLost { current: None, .. }) => {}
        other => panic!("{other:?}"),
    }
    // Never revived.
    assert_eq!(f.get("TASK-1").await.lease, None);
}

pub async fn l5_expired_lease_is_absent_and_claimable(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 3)).await.unwrap();
    let leased = ItemFilter { leased: Some(true), ..Default::default() };
    assert_eq!(f.store.list_items(&f.ws, &leased, 50, None).await.unwrap().items.len(), 1);
    pass(Duration::from_millis(3100)).await;
    // Nothing ran in between: expiry alone made it absent everywhere.
    assert_eq!(f.get("TASK-1").await.lease, None);
    assert!(f.store.list_items(&f.ws, &leased, 50, None).await.unwrap().items.is_empty());
    let all = f.store.list_items(&f.ws, &ItemFilter::default(), 50, None).await.unwrap();
    assert_eq!(all.items[0].lease, None);
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-b", 60)).await.unwrap().lease;
    assert_eq!((l.holder.as_str(), l.epoch), ("runner-b", 2));
}

pub async fn l6_release_is_idempotent_and_refuses_others(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let none = f.store.release(&f.ws, &rf("TASK-1"), &f.release("runner-a")).await.unwrap();
    assert!(!none.released());
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 60)).await.unwrap().lease;
    assert_eq!(held_by(f.store.release(&f.ws, &rf("TASK-1"), &f.release("runner-b")).await.unwrap_err()), "runner-a");
    let mut wrong_epoch = f.release("runner-a");
    wrong_epoch.handle = LeaseHandle::epoch(l.epoch + 5);
    assert!(matches!(f.store.release(&f.ws, &rf("TASK-1"), &wrong_epoch).await, Err(StoreError::LeaseLost { .. })));
    assert!(f.get("TASK-1").await.lease.is_some());
    let mut ours = f.release("runner-a");
    ours.handle = LeaseHandle::epoch(l.epoch);
    let out = f.store.release(&f.ws, &rf("TASK-1"), &ours).await.unwrap();
    assert!(out.released());
    assert_eq!(f.get("TASK-1").await.lease, None);
    let again = f.store.release(&f.ws, &rf("TASK-1"), &f.release("runner-a")).await.unwrap();
    assert!(!again.released());
    // Released means claimable by anyone at once.
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-b", 60)).await.unwrap();
}

pub async fn l7_other_user_with_same_holder_is_refused(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("bot", 60)).await.unwrap().lease;
    let mut claim = f.claim("bot", 60);
    claim.actor = f.editor;
    assert_eq!(held_by(f.store.claim(&f.ws, &rf("TASK-1"), &claim).await.unwrap_err()), "bot");
    let mut renew = f.renew("bot", l.epoch);
    renew.actor = f.editor;
    assert_eq!(held_by(f.store.renew(&f.ws, &rf("TASK-1"), &renew).await.unwrap_err()), "bot");
    let mut release = f.release("bot");
    release.actor = f.editor;
    assert_eq!(held_by(f.store.release(&f.ws, &rf("TASK-1"), &release).await.unwrap_err()), "bot");
    assert_eq!(f.get("TASK-1").await.lease, Some(l));
}

/// L6: a release says how long the lease was held, from its grant to its
/// end, both on the store's clock (the hold-time metric reads it; an
/// instance's own clock may differ from the database's).
pub async fn l6_release_says_how_long_the_lease_was_held(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("bot", 60)).await.unwrap();
    pass(Duration::from_secs(2)).await;
    let out = f.store.release(&f.ws, &rf("TASK-1"), &f.release("bot")).await.unwrap();
    let held = out.held.expect("a lease ended");
    assert!(held >= chrono::Duration::seconds(2) && held < chrono::Duration::seconds(60), "{held:?}");
    let again = f.store.release(&f.ws, &rf("TASK-1"), &f.release("bot")).await.unwrap();
    assert_eq!((again.released(), again.held), (false, None));
}

pub async fn l7_owner_breaks_a_lease_with_a_reason(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let mut claim = f.claim("runner-e", 60);
    claim.actor = f.editor;
    f.store.claim(&f.ws, &rf("TASK-1"), &claim).await.unwrap();
    let mut brk = f.release("owner@example.com");
    brk.force = true;
    assert!(
        matches!(f.store.release(&f.ws, &rf("TASK-1"), &brk).await, Err(StoreError::Validation(e)) if e.field == "reason")
    );
    brk.reason = Some("stuck".into());
    let out = f.store.release(&f.ws, &rf("TASK-1"), &brk).await.unwrap();
    assert!(out.released());
    assert_eq!(out.reason, pad_store::ReleaseReason::Broken);
    assert_eq!(out.lease.unwrap().holder, "runner-e");
    assert_eq!(f.get("TASK-1").await.lease, None);
}

/// L7, "Told why": the break's reason and breaker stay with the lease they
/// ended, and the holder's next renew, complete or fail under it is refused
/// with them.
pub async fn l7_a_broken_lease_tells_its_holder_why(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let mut claim = f.claim("runner-e", 60);
    claim.actor = f.editor;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &claim).await.unwrap().lease;
    let mut brk = f.release("owner@example.com");
    brk.force = true;
    brk.reason = Some("deploy freeze".into());
    f.store.release(&f.ws, &rf("TASK-1"), &brk).await.unwrap();
    let last = f.get("TASK-1").await.last_lease.unwrap();
    assert_eq!((last.ended, last.lease_id), (LeaseEnd::Broken, l.lease_id));
    assert_eq!((last.reason.as_deref(), last.broken_by.as_deref()), (Some("deploy freeze"), Some("owner@example.com")));

    let told = |e: StoreError| match e {
        StoreError::LeaseLost { ended, .. } => {
            let ended = ended.expect("the caller's lease, as it ended");
            assert_eq!((ended.ended, ended.lease_id), (LeaseEnd::Broken, l.lease_id));
            assert_eq!(ended.reason.as_deref(), Some("deploy freeze"));
            assert_eq!(ended.broken_by.as_deref(), Some("owner@example.com"));
        }
        other => panic!("expected lease_lost, got {other:?}"),
    };
    let mut renew = f.renew("runner-e", l.epoch);
    renew.actor = f.editor;
    let e = f.store.renew(&f.ws, &rf("TASK-1"), &renew).await.unwrap_err();
    assert!(e.to_string().contains("broken by owner@example.com: deploy freeze"), "{e}");
    told(e);
    let mut complete = f.complete("runner-e", LeaseHandle::epoch(l.epoch));
    complete.actor = f.editor;
    told(f.store.complete(&f.ws, &rf("TASK-1"), &complete).await.unwrap_err());
    let mut fail = f.fail("runner-e", LeaseHandle::lease_id(l.lease_id), Some("gave up"));
    fail.actor = f.editor;
    told(f.store.fail(&f.ws, &rf("TASK-1"), &fail).await.unwrap_err());
    assert_eq!(f.get("TASK-1").await.failures, 0, "a refused fail writes nothing");

    // While someone else holds the item the broken lease is still the last
    // one; once that lease ends, the caller's lease is history and no longer
    // described, and no later ending carries the old reason.
    let next = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-f", 60)).await.unwrap().lease;
    match f.store.renew(&f.ws, &rf("TASK-1"), &renew).await.unwrap_err() {
        StoreError::LeaseLost { current, ended, .. } => {
            assert_eq!(current.unwrap().holder, "runner-f");
            assert_eq!(ended.unwrap().lease_id, l.lease_id);
        }
        other => panic!("expected lease_lost, got {other:?}"),
    }
    f.store.release(&f.ws, &rf("TASK-1"), &f.release("runner-f")).await.unwrap();
    assert!(matches!(
        f.store.renew(&f.ws, &rf("TASK-1"), &renew).await,
        Err(StoreError::LeaseLost { ended: None, .. })
    ));
    let last = f.get("TASK-1").await.last_lease.unwrap();
    assert_eq!((last.lease_id, last.reason, last.broken_by), (next.lease_id, None, None));
}

pub async fn l8_bad_ttl_is_refused_before_any_write(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    for ttl in [0, 86_401, -1, -86_400, i64::MAX] {
        assert!(
            matches!(
                f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", ttl)).await,
                Err(StoreError::InvalidTtl(_))
            ),
            "{ttl}"
        );
    }
    assert_eq!(f.get("TASK-1").await.lease, None);
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 86_400)).await.unwrap().lease;
    assert_eq!(l.epoch, 1, "refused claims must not consume epochs");
    let mut renew = f.renew("runner-a", 1);
    renew.ttl_seconds = Some(0);
    assert!(matches!(f.store.renew(&f.ws, &rf("TASK-1"), &renew).await, Err(StoreError::InvalidTtl(_))));
    assert_eq!(f.get("TASK-1").await.lease, Some(l));
    // No TTL: the workspace default of 15 minutes.
    f.item("two").await;
    let mut req = f.claim("runner-a", 1);
    req.ttl_seconds = None;
    assert_eq!(f.store.claim(&f.ws, &rf("TASK-2"), &req).await.unwrap().lease.ttl_seconds, 900);
}

pub async fn l9_leases_never_touch_content(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let item = f.item("one").await;
    let versions = f.store.history(&f.ws, &rf("TASK-1")).await.unwrap().len();
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 60)).await.unwrap().lease;
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 60)).await.unwrap();
    f.store.renew(&f.ws, &rf("TASK-1"), &f.renew("runner-a", l.epoch)).await.unwrap();
    assert_eq!(f.get("TASK-1").await.updated_at, item.updated_at);
    // An editor who read the item before the claim can still write.
    let patch =
        ItemPatch { title: Some("edited".into()), expected_updated_at: Some(item.updated_at), ..Default::default() };
    let edited = f.store.update_item(&f.ws, f.editor, &rf("TASK-1"), &patch).await.unwrap();
    f.store.release(&f.ws, &rf("TASK-1"), &f.release("runner-a")).await.unwrap();
    let after = f.get("TASK-1").await;
    assert_eq!(after.updated_at, edited.updated_at);
    assert_eq!(f.store.history(&f.ws, &rf("TASK-1")).await.unwrap().len(), versions + 1);
}

pub async fn l10_fenced_writes_need_the_live_epoch(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 3)).await.unwrap().lease;
    let fenced =
        |epoch, title: &str| ItemPatch { title: Some(title.into()), lease_epoch: Some(epoch), ..Default::default() };
    f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &fenced(l.epoch, "by a")).await.unwrap();
    pass(Duration::from_millis(3100)).await;
    let b = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-b", 60)).await.unwrap().lease;
    match f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &fenced(l.epoch, "stale a")).await {
        Err(StoreError::LeaseLost { current, .. }) => assert_eq!(current.unwrap().holder, "runner-b"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        f.store.delete_item(&f.ws, f.owner, &rf("TASK-1"), LeaseHandle::epoch(l.epoch)).await,
        Err(StoreError::LeaseLost { .. })
    ));
    let now = f.get("TASK-1").await;
    assert_eq!(now.title, "by a");
    assert!(now.deleted_at.is_none());
    f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &fenced(b.epoch, "by b")).await.unwrap();
}

pub async fn epochs_are_never_reused(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("one").await;
    for expected in 1..=5 {
        let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim(&format!("w{expected}"), 60)).await.unwrap().lease;
        assert_eq!(l.epoch, expected);
        let mut rel = f.release(&l.holder);
        rel.handle = LeaseHandle::epoch(l.epoch);
        assert!(f.store.release(&f.ws, &rf("TASK-1"), &rel).await.unwrap().released());
    }
}

/// L17: every grant has its own lease id in the workspace; renew, release
/// and fenced writes accept it, and another item's or an ended lease's id
/// is `lease_lost`.
pub async fn l17_lease_ids_name_one_grant_in_the_workspace(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    f.item("b").await;
    let a = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    let b = f.store.claim(&f.ws, &rf("TASK-2"), &f.claim("w", 60)).await.unwrap().lease;
    assert_eq!((a.epoch, b.epoch), (1, 1));
    assert_ne!(a.lease_id, b.lease_id);
    // A refresh keeps the handle.
    let refreshed = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap();
    assert!(refreshed.refreshed);
    assert_eq!(refreshed.lease.lease_id, a.lease_id);
    let by_id = |id| RenewRequest { handle: LeaseHandle::lease_id(id), ..f.renew("w", 0) };
    // Item A's handle does not renew item B, though both are at epoch 1.
    lost(f.store.renew(&f.ws, &rf("TASK-2"), &by_id(a.lease_id)).await.unwrap_err());
    assert_eq!(f.store.renew(&f.ws, &rf("TASK-2"), &by_id(b.lease_id)).await.unwrap().lease_id, b.lease_id);
    // Fenced writes.
    let fenced = |id| ItemPatch { title: Some("x".into()), lease_id: Some(id), ..Default::default() };
    lost(f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &fenced(b.lease_id)).await.unwrap_err());
    assert_eq!(f.get("TASK-1").await.title, "a");
    f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &fenced(a.lease_id)).await.unwrap();
    let both_wrong = ItemPatch { lease_epoch: Some(1), ..fenced(b.lease_id) };
    lost(f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &both_wrong).await.unwrap_err());
    lost(f.store.delete_item(&f.ws, f.owner, &rf("TASK-2"), LeaseHandle::lease_id(a.lease_id)).await.unwrap_err());
    assert_eq!(f.get("TASK-2").await.deleted_at, None);
    // Release by handle; the handle then names an ended lease.
    let release = |id| ReleaseRequest { handle: LeaseHandle::lease_id(id), ..f.release("w") };
    lost(f.store.release(&f.ws, &rf("TASK-1"), &release(b.lease_id)).await.unwrap_err());
    assert!(f.store.release(&f.ws, &rf("TASK-1"), &release(a.lease_id)).await.unwrap().released());
    lost(f.store.renew(&f.ws, &rf("TASK-1"), &by_id(a.lease_id)).await.unwrap_err());
    let again = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    assert!(again.lease_id != a.lease_id && again.lease_id != b.lease_id);
    lost(f.store.renew(&f.ws, &rf("TASK-1"), &by_id(a.lease_id)).await.unwrap_err());
    // Unique across many grants.
    let mut seen = HashSet::from([a.lease_id, b.lease_id, again.lease_id]);
    for _ in 0..5 {
        f.store.release(&f.ws, &rf("TASK-1"), &f.release("w")).await.unwrap();
        assert!(seen.insert(f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease.lease_id));
    }
}

/// L17: `refresh: false` makes even the live holder's claim `lease_held`.
pub async fn l17_claim_without_refresh_is_contention(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    let once = ClaimRequest { refresh: false, ..f.claim("w", 60) };
    assert_eq!(held_by(f.store.claim(&f.ws, &rf("TASK-1"), &once).await.unwrap_err()), "w");
    assert_eq!(f.get("TASK-1").await.lease, Some(l.clone()));
    f.store.release(&f.ws, &rf("TASK-1"), &f.release("w")).await.unwrap();
    let granted = f.store.claim(&f.ws, &rf("TASK-1"), &once).await.unwrap();
    assert!(!granted.refreshed);
    assert_eq!(granted.lease.epoch, 2);
}
