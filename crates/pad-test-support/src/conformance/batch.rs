//! The batch verbs (docs/api.md, "Batches and long polls"): claim-next for
//! several items at once and one renewal call for many leases. The rules are
//! L11 and L4 as for one item; these tests prove that batching changes none
//! of them.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use pad_core::EventKind;
use pad_core::{FrontierFilter, Status};
use pad_store::{RenewRequest, Store, StoreError};

use super::{Fixture, events_of, pass, rf};

/// L11: `count` grants the best ready items, each its own lease with its
/// own epoch, id and `lease.claimed` event; fewer when fewer are ready;
/// none of them again.
pub async fn l11_claim_next_many_grants_each_item_its_own_lease(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    for t in ["a", "b", "c", "d", "e"] {
        f.item(t).await;
    }
    let all = FrontierFilter::default();
    let first = f.store.claim_next_many(&f.ws, &all, &f.claim("w", 60), 3).await.unwrap();
    let refs: Vec<_> = first.iter().map(|(i, _)| i.item_ref.to_string()).collect();
    assert_eq!(refs, ["TASK-1", "TASK-2", "TASK-3"], "best first");
    let ids: HashSet<_> = first.iter().map(|(_, o)| o.lease.lease_id).collect();
    assert_eq!(ids.len(), 3, "one lease id per grant");
    for (item, out) in &first {
        assert_eq!(item.lease.as_ref(), Some(&out.lease), "the item is read after its grant");
        assert_eq!(out.lease.holder, "w");
        assert!(!out.refreshed);
    }
    assert_eq!(events_of(&f, EventKind::LeaseClaimed).await.len(), 3);
    let rest = f.store.claim_next_many(&f.ws, &all, &f.claim("w", 60), 32).await.unwrap();
    let refs: Vec<_> = rest.iter().map(|(i, _)| i.item_ref.to_string()).collect();
    assert_eq!(refs, ["TASK-4", "TASK-5"], "only what is ready, never an item granted before");
    assert!(f.store.claim_next_many(&f.ws, &all, &f.claim("w", 60), 4).await.unwrap().is_empty());
    assert_eq!(events_of(&f, EventKind::LeaseClaimed).await.len(), 5);
}

/// L11, L12, L5 in one batch: free items and an item whose lease expired,
/// granted together, best first; each grant hands over the note its item's
/// previous holder left, each item comes back as its grant left it, and
/// the expiry is recorded before the grant that follows it.
pub async fn l12_claim_next_many_hands_over_notes_over_free_and_expired_items(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    for t in ["released", "expired", "fresh"] {
        f.item(t).await;
    }
    let mut noted = f.claim("runner-a", 60);
    noted.note = Some("left at step 2".into());
    f.store.claim(&f.ws, &rf("TASK-1"), &noted).await.unwrap();
    f.store.release(&f.ws, &rf("TASK-1"), &f.release("runner-a")).await.unwrap();
    let mut crashing = f.claim("crasher", 3);
    crashing.note = Some("crashed at step 5".into());
    f.store.claim(&f.ws, &rf("TASK-2"), &crashing).await.unwrap();
    pass(Duration::from_millis(3100)).await;

    let mut req = f.claim("w", 60);
    req.note = Some("taken by w".into());
    let got = f.store.claim_next_many(&f.ws, &FrontierFilter::default(), &req, 3).await.unwrap();
    let refs: Vec<_> = got.iter().map(|(i, _)| i.item_ref.to_string()).collect();
    assert_eq!(refs, ["TASK-1", "TASK-2", "TASK-3"], "best first");
    let handed: Vec<_> = got.iter().map(|(_, o)| (o.previous_note.as_deref(), o.previous_holder.as_deref())).collect();
    assert_eq!(
        handed,
        [(Some("left at step 2"), Some("runner-a")), (Some("crashed at step 5"), Some("crasher")), (None, None)]
    );
    for (item, out) in &got {
        assert_eq!(out.lease.holder, "w");
        assert_eq!(item.lease_note.as_deref(), Some("taken by w"), "{}", item.item_ref);
        assert_eq!(item, &f.get(&item.item_ref.to_string()).await, "the item as its grant left it");
    }
    let expired = events_of(&f, EventKind::LeaseExpired).await;
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].item_ref.as_deref(), Some("TASK-2"));
    let claimed = events_of(&f, EventKind::LeaseClaimed).await;
    assert_eq!(claimed.len(), 5, "two claims before, three grants now");
    // Each grant is made as if alone, in frontier order: the expiry is
    // recorded just before the grant it precedes, and the grants that
    // follow it come after (docs/leases.md, "Claim-next in one statement").
    let mut seq: Vec<_> = claimed[2..].iter().chain(&expired).map(|e| (e.id, e.kind, e.item_ref.clone())).collect();
    seq.sort_by_key(|e| e.0);
    let seq: Vec<_> = seq.into_iter().map(|(_, kind, r)| (kind, r.unwrap())).collect();
    let at = |kind, r: &str| (kind, r.to_string());
    assert_eq!(
        seq,
        [
            at(EventKind::LeaseClaimed, "TASK-1"),
            at(EventKind::LeaseExpired, "TASK-2"),
            at(EventKind::LeaseClaimed, "TASK-2"),
            at(EventKind::LeaseClaimed, "TASK-3"),
        ]
    );
    let ids: Vec<_> = got.iter().map(|(_, o)| o.lease.lease_id).collect();
    assert!(ids.is_sorted() && ids.windows(2).all(|w| w[0] != w[1]), "lease ids in grant order: {ids:?}");
}

/// L11 under contention: many batch claimers at once never share an item,
/// and together they take every ready item exactly once.
pub async fn l11_concurrent_batch_claimers_never_share_an_item(store: Arc<dyn Store>) {
    let f = Arc::new(Fixture::new(store).await);
    const ITEMS: usize = 120;
    for i in 0..ITEMS {
        f.item(&format!("job {i}")).await;
    }
    let tasks: Vec<_> = (0..12)
        .map(|w| {
            let f = f.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let req = f.claim(&format!("w{w}"), 60);
                    let got = f.store.claim_next_many(&f.ws, &FrontierFilter::default(), &req, 4).await.unwrap();
                    if got.is_empty() {
                        return mine;
                    }
                    mine.extend(got.into_iter().map(|(i, _)| i.item_ref.to_string()));
                }
            })
        })
        .collect();
    let mut seen = HashSet::new();
    for t in futures::future::join_all(tasks).await {
        for r in t.unwrap() {
            assert!(seen.insert(r.clone()), "{r} granted twice");
        }
    }
    assert_eq!(seen.len(), ITEMS, "every ready item granted once");
}

/// L4 for many leases: each renewed or refused on its own; a lost lease
/// among them does not keep the others from being renewed.
pub async fn l4_renew_many_renews_or_refuses_each_lease_alone(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    for t in ["kept", "released", "kept too"] {
        f.item(t).await;
    }
    let grants = f.store.claim_next_many(&f.ws, &FrontierFilter::default(), &f.claim("w", 60), 3).await.unwrap();
    let epoch = |i: usize| grants[i].1.lease.epoch;
    f.store.release(&f.ws, &rf("TASK-2"), &f.release("w")).await.unwrap();
    pass(Duration::from_millis(20)).await;
    let renewals: Vec<(pad_core::ItemRef, RenewRequest)> = (0..3)
        .map(|i| (grants[i].0.item_ref.clone(), RenewRequest { ttl_seconds: Some(120), ..f.renew("w", epoch(i)) }))
        .collect();
    let answers = f.store.renew_many(&f.ws, &renewals).await;
    assert_eq!(answers.len(), 3);
    for i in [0, 2] {
        let l = answers[i].as_ref().unwrap();
        assert_eq!(l.epoch, epoch(i));
        assert!(l.expires_at > grants[i].1.lease.expires_at, "renewed");
        assert_eq!(f.get(&grants[i].0.item_ref.to_string()).await.lease.unwrap().expires_at, l.expires_at);
    }
    assert!(matches!(answers[1], Err(StoreError::LeaseLost { .. })), "{:?}", answers[1]);
    // A stale epoch is refused on its own too, and changes nothing.
    let stale = vec![(rf("TASK-1"), f.renew("w", epoch(0) + 100))];
    assert!(matches!(f.store.renew_many(&f.ws, &stale).await[0], Err(StoreError::LeaseLost { .. })));
    assert_eq!(f.get("TASK-2").await.status, Status::Open);
    assert!(f.get("TASK-2").await.lease.is_none());
}
