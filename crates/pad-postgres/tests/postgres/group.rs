//! Lease calls that share a transaction (docs/leases.md): a batch commits
//! once, a refused call fails none of its neighbours, and claim-next
//! batches on three instances never grant an item twice.
//!
//! The batches are made deterministic with the store's test hold: calls
//! queue while it is held (counted by `queued_calls`, a signal from the
//! code, not a sleep), and run as one batch when it is lifted.

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use pad_core::lease::LeaseHandle;
use pad_core::{FrontierFilter, ItemRef, NewItem, Status, Workspace};
use pad_postgres::{GroupStats, PgStore};
use pad_store::{Actor, CompleteRequest, RenewRequest, Store, StoreError};

fn done(actor: Actor, holder: &str, epoch: i64) -> CompleteRequest {
    CompleteRequest {
        actor,
        holder: holder.into(),
        handle: LeaseHandle { epoch: Some(epoch), lease_id: None },
        status: Status::Done,
    }
}

/// Waits until `n` calls are queued behind the hold: the store counts them.
async fn queued(store: &PgStore, n: usize) {
    tokio::time::timeout(Duration::from_secs(60), async {
        while store.queued_calls() < n {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the calls never queued");
}

async fn setup(db: &common::ScratchDb, items: usize) -> (Arc<PgStore>, Actor, Workspace, Vec<ItemRef>) {
    let store = Arc::new(PgStore::open_with(&db.url, 8).await.unwrap());
    let owner = Actor { user_id: store.ensure_user("owner@example.com").await.unwrap().id };
    let ws = store.create_workspace("acme", "Acme", owner).await.unwrap();
    let mut refs = Vec::new();
    for i in 0..items {
        let new = NewItem { title: format!("item {i}"), ..Default::default() };
        refs.push(store.create_item(&ws, owner, &new).await.unwrap().item_ref);
    }
    (store, owner, ws, refs)
}

/// Five completes and one with a stale epoch queue as one batch: the
/// refused call gets its refusal, the five commit (the batch ran again,
/// each call alone), and the refused item keeps its lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_call_in_a_batch_fails_none_of_the_others() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!("SKIPPED a_refused_call_in_a_batch_fails_none_of_the_others: {} is not set", common::ENV);
    };
    let (store, owner, ws, refs) = setup(&db, 6).await;
    let mut epochs = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        epochs.push(store.claim(&ws, r, &common::claim(owner, &format!("w{i}"), false)).await.unwrap().lease.epoch);
    }
    let before = store.group_stats();

    store.hold_group();
    let mut calls = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        // The fourth call names an epoch that never was.
        let epoch = if i == 3 { epochs[i] + 7 } else { epochs[i] };
        let (store, ws, r, req) = (Arc::clone(&store), ws.clone(), r.clone(), done(owner, &format!("w{i}"), epoch));
        calls.push(tokio::spawn(async move { store.complete(&ws, &r, &req).await }));
    }
    queued(&store, refs.len()).await;
    store.unhold_group();
    let answers: Vec<_> = futures::future::join_all(calls).await.into_iter().map(|a| a.unwrap()).collect();

    for (i, answer) in answers.iter().enumerate() {
        if i == 3 {
            assert!(matches!(answer, Err(StoreError::LeaseLost { .. })), "call {i}: {answer:?}");
        } else {
            assert_eq!(answer.as_ref().unwrap().status, Status::Done, "call {i}");
        }
    }
    for (i, r) in refs.iter().enumerate() {
        let item = store.get_item(&ws, r).await.unwrap();
        if i == 3 {
            assert_eq!(item.status, Status::Open);
            assert_eq!(item.lease.expect("still leased").holder, "w3");
        } else {
            assert_eq!(item.status, Status::Done, "{r} committed");
            assert!(item.lease.is_none());
        }
    }
    let after = store.group_stats();
    assert_eq!(after.rerun, before.rerun + 1, "the batch ran again alone: {after:?}");
    assert_eq!(after.shared, before.shared, "nothing committed shared: {after:?}");
}

/// Completes queued together are written together (one lock and one write
/// for the lot), and each item ends exactly as a complete alone leaves it:
/// its status, its history version, its lease ended as completed, and its
/// `item.updated` then `lease.released`, the items' events in item order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completes_in_one_batch_are_written_together_as_each_alone() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED completes_in_one_batch_are_written_together_as_each_alone: {} is not set",
            common::ENV
        );
    };
    let (store, owner, ws, refs) = setup(&db, 7).await;
    let mut epochs = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        epochs.push(store.claim(&ws, r, &common::claim(owner, &format!("w{i}"), false)).await.unwrap().lease.epoch);
    }
    // The last item is done already: its complete changes no status.
    let last = refs.len() - 1;
    let patch = pad_core::ItemPatch { status: Some(Status::Done), ..Default::default() };
    store.update_item(&ws, owner, &refs[last], &patch).await.unwrap();
    let before = store.group_stats();
    let after_event = store.events_after(&ws, 0, 1000).await.unwrap().last().unwrap().id;

    store.hold_group();
    let mut calls = Vec::new();
    // Queued in reverse: the batch runs them in item order all the same.
    for (i, r) in refs.iter().enumerate().rev() {
        let (store, ws, r, req) = (Arc::clone(&store), ws.clone(), r.clone(), done(owner, &format!("w{i}"), epochs[i]));
        calls.push(tokio::spawn(async move { store.complete(&ws, &r, &req).await }));
    }
    queued(&store, refs.len()).await;
    store.unhold_group();
    for call in calls {
        let item = call.await.unwrap().unwrap();
        assert_eq!(item.status, Status::Done);
        assert!(item.lease.is_none(), "{}", item.item_ref);
        assert_eq!(item.last_lease.as_ref().unwrap().ended, pad_core::LeaseEnd::Completed, "{}", item.item_ref);
    }
    let stats = store.group_stats();
    assert_eq!(
        stats,
        GroupStats {
            shared: before.shared + 1,
            shared_calls: before.shared_calls + 7,
            completed_together: before.completed_together + 7,
            ..before
        },
    );

    let events = store.events_after(&ws, after_event, 1000).await.unwrap();
    let seen: Vec<(String, &str)> = events.iter().map(|e| (e.item_ref.clone().unwrap(), e.kind.as_str())).collect();
    let mut expected = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        if i != last {
            expected.push((r.to_string(), "item.updated"));
        }
        expected.push((r.to_string(), "lease.released"));
    }
    assert_eq!(seen, expected);
    for r in &refs {
        let versions = store.history(&ws, r).await.unwrap();
        let change = serde_json::json!({ "status": { "from": "open", "to": "done" } });
        assert_eq!(versions.len(), 2, "{r}: created, then done: {versions:?}");
        assert_eq!((versions[0].version, &versions[0].changes), (2, &change), "{r}");
    }
}

/// Claim-next, renew and complete calls queued together commit as one
/// transaction, and each caller gets its own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_lease_calls_share_one_commit() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!("SKIPPED concurrent_lease_calls_share_one_commit: {} is not set", common::ENV);
    };
    let (store, owner, ws, refs) = setup(&db, 6).await;
    // Two items already leased, to renew and to complete.
    let renewed = store.claim(&ws, &refs[0], &common::claim(owner, "r", false)).await.unwrap().lease.epoch;
    let completed = store.claim(&ws, &refs[1], &common::claim(owner, "c", false)).await.unwrap().lease.epoch;
    let before = store.group_stats();

    store.hold_group();
    let mut nexts = Vec::new();
    for i in 0..3 {
        let (store, ws) = (Arc::clone(&store), ws.clone());
        let req = common::claim(owner, &format!("n{i}"), false);
        nexts.push(tokio::spawn(async move { store.claim_next(&ws, &FrontierFilter::default(), &req).await }));
    }
    let renew = {
        let (store, ws, r) = (Arc::clone(&store), ws.clone(), refs[0].clone());
        let req = RenewRequest {
            actor: owner,
            holder: "r".into(),
            handle: LeaseHandle { epoch: Some(renewed), lease_id: None },
            ttl_seconds: Some(600),
            note: None,
        };
        tokio::spawn(async move { store.renew(&ws, &r, &req).await })
    };
    let complete = {
        let (store, ws, r, req) = (Arc::clone(&store), ws.clone(), refs[1].clone(), done(owner, "c", completed));
        tokio::spawn(async move { store.complete(&ws, &r, &req).await })
    };
    queued(&store, 5).await;
    store.unhold_group();

    let mut granted = HashSet::new();
    for next in nexts {
        let (item, outcome) = next.await.unwrap().unwrap().expect("an item was ready");
        assert!(outcome.lease.holder.starts_with('n'));
        assert!(granted.insert(item.item_ref.clone()), "{} granted twice", item.item_ref);
    }
    assert!(!granted.contains(&refs[0]) && !granted.contains(&refs[1]), "a leased item was granted");
    assert_eq!(renew.await.unwrap().unwrap().ttl_seconds, 600);
    assert_eq!(complete.await.unwrap().unwrap().status, Status::Done);
    assert_eq!(
        store.group_stats(),
        GroupStats { shared: before.shared + 1, shared_calls: before.shared_calls + 5, ..before },
    );
    // What was answered is what committed.
    for r in &granted {
        assert!(store.get_item(&ws, r).await.unwrap().lease.is_some(), "{r} not leased");
    }
    assert_eq!(store.get_item(&ws, &refs[1]).await.unwrap().status, Status::Done);
}

/// Three instances, each with eight workers claiming batches of one to four
/// and completing them, until the queue is empty: every item is granted
/// exactly once, whatever the batches were.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claim_next_batches_on_three_instances_grant_each_item_once() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED claim_next_batches_on_three_instances_grant_each_item_once: {} is not set",
            common::ENV
        );
    };
    const ITEMS: usize = 300;
    let (first, owner, ws, refs) = setup(&db, ITEMS).await;
    let mut stores = vec![first];
    for _ in 0..2 {
        stores.push(Arc::new(PgStore::open_with(&db.url, 8).await.unwrap()));
    }
    let mut workers = Vec::new();
    for (s, store) in stores.iter().enumerate() {
        for w in 0..8usize {
            let (store, ws) = (Arc::clone(store), ws.clone());
            workers.push(tokio::spawn(async move {
                let holder = format!("s{s}w{w}");
                let mut got = Vec::new();
                let mut round = 0u32;
                loop {
                    let count = 1 + (round + u32::try_from(w).unwrap()) % 4;
                    round += 1;
                    let batch = store
                        .claim_next_many(&ws, &FrontierFilter::default(), &common::claim(owner, &holder, false), count)
                        .await
                        .unwrap();
                    if batch.is_empty() {
                        return got;
                    }
                    for (item, outcome) in batch {
                        let req = done(owner, &holder, outcome.lease.epoch);
                        store.complete(&ws, &item.item_ref, &req).await.unwrap();
                        got.push(item.item_ref);
                    }
                }
            }));
        }
    }
    let mut seen = HashSet::new();
    for worker in workers {
        for r in worker.await.unwrap() {
            assert!(seen.insert(r.clone()), "{r} was granted twice");
        }
    }
    assert_eq!(seen.len(), ITEMS, "every item was granted");
    for r in &refs {
        assert_eq!(stores[0].get_item(&ws, r).await.unwrap().status, Status::Done);
    }
}
