//! Which work is ready and who gets it (docs/leases.md L11–L13): the
//! frontier's order, claim-next under concurrency and its skips, the
//! handoff note, and quarantine after repeated expiries.

use pad_core::EventKind;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use pad_core::{FrontierFilter, ItemPatch, NEEDS_HUMAN, NewItem, Priority, Status};
use pad_store::{ClaimRequest, Store, StoreError};

use super::{Fixture, events_of, pass, refs, rf};

pub async fn l11_frontier_is_ready_work_best_first(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let mk = |title: &str, priority: Priority, labels: &[&str]| NewItem {
        title: title.into(),
        priority: Some(priority),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        ..Default::default()
    };
    for new in [
        mk("low", Priority::Low, &[]),                        // TASK-1
        mk("high old", Priority::High, &["web"]),             // TASK-2
        mk("high new", Priority::High, &[]),                  // TASK-3
        mk("crit human", Priority::Critical, &[NEEDS_HUMAN]), // TASK-4
        mk("leased", Priority::Critical, &[]),                // TASK-5
        mk("done", Priority::Critical, &[]),                  // TASK-6
    ] {
        f.store.create_item(&f.ws, f.owner, &new).await.unwrap();
    }
    let blocked = NewItem {
        title: "blocked".into(),
        priority: Some(Priority::Critical),
        blocked_by: vec!["TASK-1".into()],
        parent: Some("TASK-2".into()),
        ..Default::default()
    };
    f.store.create_item(&f.ws, f.owner, &blocked).await.unwrap(); // TASK-7
    f.store.claim(&f.ws, &rf("TASK-5"), &f.claim("w", 60)).await.unwrap();
    f.store
        .update_item(&f.ws, f.owner, &rf("TASK-6"), &ItemPatch { status: Some(Status::Done), ..Default::default() })
        .await
        .unwrap();
    let frontier = |filter: FrontierFilter| {
        let f = &f;
        async move { refs(&f.store.frontier(&f.ws, &filter, 50).await.unwrap()) }
    };
    assert_eq!(frontier(FrontierFilter::default()).await, ["TASK-4", "TASK-2", "TASK-3", "TASK-1"]);
    assert_eq!(
        frontier(FrontierFilter { autonomous: true, ..Default::default() }).await,
        ["TASK-2", "TASK-3", "TASK-1"]
    );
    assert_eq!(frontier(FrontierFilter { labels: vec!["web".into()], ..Default::default() }).await, ["TASK-2"]);
    assert_eq!(
        frontier(FrontierFilter { without_labels: vec!["web".into()], autonomous: true, ..Default::default() }).await,
        ["TASK-3", "TASK-1"]
    );
    assert_eq!(
        frontier(FrontierFilter { min_priority: Some(Priority::High), autonomous: true, ..Default::default() }).await,
        ["TASK-2", "TASK-3"]
    );
    assert_eq!(
        frontier(FrontierFilter { kinds: vec!["bug".into()], ..Default::default() }).await,
        Vec::<String>::new()
    );
    // Finishing the blocker unblocks TASK-7, a child of TASK-2.
    f.store
        .update_item(&f.ws, f.owner, &rf("TASK-1"), &ItemPatch { status: Some(Status::Done), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(frontier(FrontierFilter { parent: Some("TASK-2".into()), ..Default::default() }).await, ["TASK-7"]);
    assert!(
        matches!(f.store.frontier(&f.ws, &FrontierFilter { parent: Some("x".into()), ..Default::default() }, 5).await, Err(StoreError::Validation(e)) if e.field == "parent")
    );
}

/// L11: 16 concurrent claim-next callers over 200 items: each item granted
/// exactly once, every caller served.
pub async fn l11_claim_next_gives_concurrent_callers_distinct_items(store: Arc<dyn Store>) {
    let f = Arc::new(Fixture::new(store).await);
    for i in 0..200 {
        f.item(&format!("job {i}")).await;
    }
    let tasks: Vec<_> = (0..16)
        .map(|w| {
            let f = f.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                let req = f.claim(&format!("worker-{w}"), 300);
                while let Some((item, out)) = f.store.claim_next(&f.ws, &FrontierFilter::default(), &req).await.unwrap()
                {
                    assert_eq!(out.lease.holder, format!("worker-{w}"));
                    assert!(!out.refreshed);
                    assert_eq!(item.lease.as_ref(), Some(&out.lease));
                    got.push(item.item_ref.to_string());
                }
                got
            })
        })
        .collect();
    let per_worker: Vec<Vec<String>> = futures::future::join_all(tasks).await.into_iter().map(Result::unwrap).collect();
    let all: Vec<&String> = per_worker.iter().flatten().collect();
    let distinct: HashSet<&String> = all.iter().copied().collect();
    assert_eq!(all.len(), 200, "every item granted");
    assert_eq!(distinct.len(), 200, "no item granted twice");
    assert!(
        per_worker.iter().all(|w| !w.is_empty()),
        "a caller starved: {:?}",
        per_worker.iter().map(Vec::len).collect::<Vec<_>>()
    );
}

pub async fn l11_claim_next_with_nothing_ready_is_none(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    assert!(f.store.claim_next(&f.ws, &FrontierFilter::default(), &f.claim("w", 60)).await.unwrap().is_none());
    f.item("a").await;
    let human = NewItem {
        title: "h".into(),
        labels: vec![NEEDS_HUMAN.into()],
        priority: Some(Priority::Critical),
        ..Default::default()
    };
    f.store.create_item(&f.ws, f.owner, &human).await.unwrap();
    let auto = FrontierFilter { autonomous: true, ..Default::default() };
    let (item, _) = f.store.claim_next(&f.ws, &auto, &f.claim("w", 60)).await.unwrap().unwrap();
    assert_eq!(item.item_ref.to_string(), "TASK-1");
    assert!(f.store.claim_next(&f.ws, &auto, &f.claim("w", 60)).await.unwrap().is_none());
    let mut bad = f.claim("w", 0);
    bad.ttl_seconds = Some(0);
    assert!(matches!(
        f.store.claim_next(&f.ws, &FrontierFilter::default(), &bad).await,
        Err(StoreError::InvalidTtl(_))
    ));
    assert_eq!(f.get("TASK-2").await.lease, None, "a refused claim-next grants nothing");
}

pub async fn l12_handoff_note_reaches_the_next_claimant(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    let first = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 3)).await.unwrap();
    assert_eq!((first.previous_note, first.previous_holder), (None, None));
    let mut renew = f.renew("runner-a", first.lease.epoch);
    renew.note = Some("migrated 3 of 7 tables".into());
    f.store.renew(&f.ws, &rf("TASK-1"), &renew).await.unwrap();
    // While the lease lives, its note is readable on the item.
    assert_eq!(f.get("TASK-1").await.lease_note.as_deref(), Some("migrated 3 of 7 tables"));
    pass(Duration::from_millis(3100)).await;
    // Expired: no live lease, so no live note (the handoff below still has it).
    assert_eq!(f.get("TASK-1").await.lease_note, None);
    let second = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-b", 60)).await.unwrap();
    assert_eq!(f.get("TASK-1").await.lease_note, None, "a new grant starts without a note");
    assert_eq!(second.previous_note.as_deref(), Some("migrated 3 of 7 tables"));
    assert_eq!(second.previous_holder.as_deref(), Some("runner-a"));
    let mut refresh = f.claim("runner-b", 60);
    refresh.note = Some("resumed at table 4".into());
    f.store.claim(&f.ws, &rf("TASK-1"), &refresh).await.unwrap();
    assert_eq!(f.get("TASK-1").await.lease_note.as_deref(), Some("resumed at table 4"));
    f.store.release(&f.ws, &rf("TASK-1"), &f.release("runner-b")).await.unwrap();
    assert_eq!(f.get("TASK-1").await.lease_note, None);
    let third = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-c", 60)).await.unwrap();
    assert_eq!(third.previous_note.as_deref(), Some("resumed at table 4"));
    assert_eq!(third.previous_holder.as_deref(), Some("runner-b"));
}

/// L13: three expiries quarantine an item: `needs-human`, out of the
/// autonomous frontier, and an event that says why.
pub async fn l13_quarantine_after_repeated_expiries(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("crashy").await;
    f.item("fine").await;
    let auto = FrontierFilter { autonomous: true, ..Default::default() };
    for round in 0..3 {
        let (item, _) =
            f.store.claim_next(&f.ws, &auto, &f.claim(&format!("crasher-{round}"), 1)).await.unwrap().unwrap();
        assert_eq!(item.item_ref.to_string(), "TASK-1", "round {round}");
        pass(Duration::from_millis(1100)).await;
    }
    // The next claim-next observes the third expiry, quarantines TASK-1 and moves on.
    let (item, _) = f.store.claim_next(&f.ws, &auto, &f.claim("next", 60)).await.unwrap().unwrap();
    assert_eq!(item.item_ref.to_string(), "TASK-2");
    let crashy = f.get("TASK-1").await;
    assert!(crashy.labels.iter().any(|l| l == NEEDS_HUMAN), "{:?}", crashy.labels);
    assert_eq!(crashy.lease, None);
    assert!(refs(&f.store.frontier(&f.ws, &auto, 10).await.unwrap()).is_empty());
    assert_eq!(refs(&f.store.frontier(&f.ws, &FrontierFilter::default(), 10).await.unwrap()), ["TASK-1"]);
    let events = f.store.events_after(&f.ws, 0, 1000).await.unwrap();
    let q: Vec<_> = events.iter().filter(|e| e.kind == EventKind::ItemQuarantined).collect();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].item_ref.as_deref(), Some("TASK-1"));
    assert!(q[0].data["reason"].as_str().unwrap().contains("expired 3 times"), "{}", q[0].data);
    assert_eq!(events.iter().filter(|e| e.kind == EventKind::LeaseExpired).count(), 3);
}

/// L11: claim-next passes over excluded refs.
pub async fn l11_claim_next_skips_excluded_refs(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    f.item("b").await;
    let skip_first = FrontierFilter { exclude: vec!["task-1".into()], ..Default::default() };
    assert_eq!(refs(&f.store.frontier(&f.ws, &skip_first, 10).await.unwrap()), ["TASK-2"]);
    let (got, _) = f.store.claim_next(&f.ws, &skip_first, &f.claim("w", 60)).await.unwrap().unwrap();
    assert_eq!(got.item_ref.to_string(), "TASK-2");
    assert!(f.store.claim_next(&f.ws, &skip_first, &f.claim("w", 60)).await.unwrap().is_none());
    // No churn: the excluded item was never claimed.
    assert_eq!(f.get("TASK-1").await.last_lease, None);
    assert_eq!(events_of(&f, pad_core::EventKind::LeaseClaimed).await.len(), 1);
    let bad = FrontierFilter { exclude: vec!["nope".into()], ..Default::default() };
    let e = f.store.frontier(&f.ws, &bad, 10).await.unwrap_err();
    assert!(matches!(&e, StoreError::Validation(v) if v.field == "exclude[0]"), "{e:?}");
}

/// L11: with `skip_session`, claim-next and frontier pass over items whose
/// last lease had that session id, however it ended (released, expired):
/// a drain's finished work, without a list that grows with it. Other
/// sessions still see them. `exclude` takes up to 500 refs, not one more.
pub async fn l11_claim_next_skips_a_sessions_own_work(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    for t in ["a", "b", "c"] {
        f.item(t).await;
    }
    let mine = FrontierFilter { skip_session: Some("drain-1".into()), ..Default::default() };
    let req = ClaimRequest { session_id: Some("drain-1".into()), ..f.claim("w", 60) };
    let (a, _) = f.store.claim_next(&f.ws, &mine, &req).await.unwrap().unwrap();
    assert_eq!(a.item_ref.to_string(), "TASK-1");
    f.store.release(&f.ws, &a.item_ref, &f.release("w")).await.unwrap();
    let short = ClaimRequest { ttl_seconds: Some(1), ..req.clone() };
    let (b, _) = f.store.claim_next(&f.ws, &mine, &short).await.unwrap().unwrap();
    assert_eq!(b.item_ref.to_string(), "TASK-2", "the released item is this session's done work");
    // TASK-2's lease runs out unrecorded: still this session's.
    pass(Duration::from_millis(1100)).await;
    assert_eq!(refs(&f.store.frontier(&f.ws, &mine, 10).await.unwrap()), ["TASK-3"]);
    let (c, _) = f.store.claim_next(&f.ws, &mine, &req).await.unwrap().unwrap();
    assert_eq!(c.item_ref.to_string(), "TASK-3");
    f.store.release(&f.ws, &c.item_ref, &f.release("w")).await.unwrap();
    assert!(f.store.claim_next(&f.ws, &mine, &req).await.unwrap().is_none());
    let other = FrontierFilter { skip_session: Some("drain-2".into()), ..Default::default() };
    assert_eq!(refs(&f.store.frontier(&f.ws, &other, 10).await.unwrap()), ["TASK-1", "TASK-2", "TASK-3"]);
    // One limit for exclude: 500 is taken, 501 is refused and names the field.
    let refs_of = |n: usize| (1..=n).map(|i| format!("TASK-{}", i + 10)).collect::<Vec<_>>();
    let at_limit = FrontierFilter { exclude: refs_of(pad_core::EXCLUDE_MAX), ..Default::default() };
    assert_eq!(f.store.frontier(&f.ws, &at_limit, 10).await.unwrap().len(), 3);
    let past = FrontierFilter { exclude: refs_of(pad_core::EXCLUDE_MAX + 1), ..Default::default() };
    let e = f.store.claim_next(&f.ws, &past, &req).await.unwrap_err();
    assert!(matches!(&e, StoreError::Validation(v) if v.field == "exclude" && v.message.contains("500")), "{e:?}");
    let bad = FrontierFilter { skip_session: Some(String::new()), ..Default::default() };
    assert!(
        matches!(f.store.frontier(&f.ws, &bad, 10).await, Err(StoreError::Validation(v)) if v.field == "skip_session")
    );
}
