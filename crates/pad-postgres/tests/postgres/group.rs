//! Lease calls that share a transaction (docs/leases.md): a batch commits
//! once, a refused call fails none of its neighbours, and claim-next
//! batches on three instances never grant an item twice.
//!
//! The batches are made deterministic with the store's test hold: calls
//! queue while it is held (counted by `queued_calls`, a signal from the
//! code, not a sleep), and run as one batch when it is lifted.

use crate::common::{self, done, last_event, setup};

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use pad_core::lease::LeaseHandle;
use pad_core::{FrontierFilter, Status, Workspace};
use pad_postgres::{GroupStats, PgStore};
use pad_store::{Actor, RenewRequest, Store, StoreError};

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

/// Each of `refs` claimed by its own worker (`w0`, `w1`, …): their epochs.
async fn claimed_by_workers(store: &PgStore, ws: &Workspace, owner: Actor, refs: &[pad_core::ItemRef]) -> Vec<i64> {
    let mut epochs = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        epochs.push(store.claim(ws, r, &common::claim(owner, &format!("w{i}"), false)).await.unwrap().lease.epoch);
    }
    epochs
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
    let epochs = claimed_by_workers(&store, &ws, owner, &refs).await;
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
    let epochs = claimed_by_workers(&store, &ws, owner, &refs).await;
    // The last item is done already: its complete changes no status.
    let last = refs.len() - 1;
    let patch = pad_core::ItemPatch { status: Some(Status::Done), ..Default::default() };
    store.update_item(&ws, owner, &refs[last], &patch).await.unwrap();
    let before = store.group_stats();
    let after_event = last_event(&store, &ws).await;

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
        nexts.push((i, tokio::spawn(async move { store.claim_next(&ws, &FrontierFilter::default(), &req).await })));
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
    for (i, next) in nexts {
        let (item, outcome) = next.await.unwrap().unwrap().expect("an item was ready");
        assert_eq!(outcome.lease.holder, format!("n{i}"), "each claimant holds its own grant");
        assert!(granted.insert(item.item_ref.clone()), "{} granted twice", item.item_ref);
    }
    assert!(!granted.contains(&refs[0]) && !granted.contains(&refs[1]), "a leased item was granted");
    assert_eq!(renew.await.unwrap().unwrap().ttl_seconds, 600);
    assert_eq!(complete.await.unwrap().unwrap().status, Status::Done);
    assert_eq!(
        store.group_stats(),
        GroupStats {
            shared: before.shared + 1,
            shared_calls: before.shared_calls + 5,
            // The three claim-nexts ask the same terms: one statement made them.
            claimed_together: before.claimed_together + 3,
            ..before
        },
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

/// A complete that arrives alone is one statement without a
/// transaction, and leaves the item as the shared flow does: its status,
/// one history version, its lease ended as completed, `item.updated` then
/// `lease.released` (docs/leases.md, "One call, one statement").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_alone_is_written_without_a_transaction() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!("SKIPPED a_complete_alone_is_written_without_a_transaction: {} is not set", common::ENV);
    };
    let (store, owner, ws, refs) = setup(&db, 1).await;
    let r = &refs[0];
    let epoch = store.claim(&ws, r, &common::claim(owner, "w", false)).await.unwrap().lease.epoch;
    let after_event = last_event(&store, &ws).await;
    let before = store.group_stats();

    let item = store.complete(&ws, r, &done(owner, "w", epoch)).await.unwrap();
    assert_eq!(item.status, Status::Done);
    assert!(item.lease.is_none());
    assert_eq!(item.last_lease.as_ref().unwrap().ended, pad_core::LeaseEnd::Completed);
    assert_eq!(item, store.get_item(&ws, r).await.unwrap(), "the answer is the item as committed");
    let stats = store.group_stats();
    assert_eq!(stats, GroupStats { one_statement: before.one_statement + 1, ..before });

    let kinds: Vec<_> = store.events_after(&ws, after_event, 1000).await.unwrap().iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [pad_core::EventKind::ItemUpdated, pad_core::EventKind::LeaseReleased]);
    let versions = store.history(&ws, r).await.unwrap();
    assert_eq!(versions.len(), 2, "created, then done: {versions:?}");
    assert_eq!(versions[0].version, 2);
}

/// A release or a break that arrives alone is one statement without a
/// transaction: the lease ends, the break keeps its reason and breaker, a
/// release after success records it (L14), and each appends its event
/// with the rule's data. A release that finds its lease expired but not
/// yet recorded is made in a transaction, which records the expiry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_alone_is_one_statement() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!("SKIPPED a_release_alone_is_one_statement: {} is not set", common::ENV);
    };
    let (store, owner, ws, refs) = setup(&db, 3).await;
    let first = last_event(&store, &ws).await;
    let before = store.group_stats();
    let noted = pad_store::ClaimRequest { note: Some("half done".into()), ..common::claim(owner, "w1", false) };
    let w1 = store.claim(&ws, &refs[0], &noted).await.unwrap().lease;
    let w2 = store.claim(&ws, &refs[1], &common::claim(owner, "w2", false)).await.unwrap().lease;
    let ok = pad_store::ReleaseRequest {
        succeeded: true,
        handle: LeaseHandle { epoch: Some(w1.epoch), lease_id: Some(w1.lease_id) },
        ..release(owner, "w1")
    };
    let released = store.release(&ws, &refs[0], &ok).await.unwrap();
    assert_eq!(released.reason, pad_store::ReleaseReason::Released);
    let brk = pad_store::ReleaseRequest { force: true, reason: Some("stuck".into()), ..release(owner, "ops") };
    let broken = store.release(&ws, &refs[1], &brk).await.unwrap();
    assert_eq!(
        (broken.reason, broken.lease.map(|l| l.lease_id)),
        (pad_store::ReleaseReason::Broken, Some(w2.lease_id))
    );
    let stats = store.group_stats();
    assert_eq!(stats, GroupStats { one_statement: before.one_statement + 2, ..before });

    let item = store.get_item(&ws, &refs[0]).await.unwrap();
    assert!(item.lease.is_none() && item.last_success_at.is_some(), "{item:?}");
    assert_eq!(item.lease_note, None, "a success clears the note: {item:?}");
    let last = item.last_lease.unwrap();
    assert_eq!((last.ended, last.note.as_deref()), (pad_core::LeaseEnd::Released, Some("half done")));
    assert_eq!((last.reason, last.broken_by), (None, None), "a release records no break");
    let last = store.get_item(&ws, &refs[1]).await.unwrap().last_lease.unwrap();
    assert_eq!((last.ended, last.lease_id), (pad_core::LeaseEnd::Broken, w2.lease_id));
    assert_eq!((last.reason.as_deref(), last.broken_by.as_deref()), (Some("stuck"), Some("owner@example.com")));
    let events = store.events_after(&ws, first, 1000).await.unwrap();
    let ends: Vec<_> = events.iter().filter(|e| e.kind != pad_core::EventKind::LeaseClaimed).collect();
    assert_eq!(ends.len(), 2, "{events:?}");
    assert_eq!(ends[0].kind, pad_core::EventKind::LeaseReleased);
    assert_eq!(ends[0].data["ended"], "released");
    assert_eq!(ends[1].kind, pad_core::EventKind::LeaseBroken);
    assert_eq!(
        (&ends[1].data["reason"], &ends[1].data["lease_id"]),
        (&serde_json::json!("stuck"), &w2.lease_id.into())
    );

    // An expired lease: the statement alone writes nothing; the transaction records it.
    let short = pad_store::ClaimRequest { ttl_seconds: Some(1), ..common::claim(owner, "w3", false) };
    store.claim(&ws, &refs[2], &short).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = last_event(&store, &ws).await;
    let stale = store.group_stats();
    let late = store.release(&ws, &refs[2], &release(owner, "w3")).await.unwrap();
    assert_eq!(late.reason, pad_store::ReleaseReason::NoLiveLease, "{late:?}");
    let kinds: Vec<_> = store.events_after(&ws, after, 1000).await.unwrap().iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [pad_core::EventKind::LeaseExpired]);
    assert_eq!(store.group_stats().to_transaction, stale.to_transaction + 1);
}

/// A claim-next alone is one statement when its candidates have no lease;
/// when the best candidate's lease has expired, the statement grants
/// nothing and the claim-next is made in a transaction, which records the
/// expiry before it grants (L5, L13).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_next_alone_hands_an_expired_lease_to_a_transaction() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED a_claim_next_alone_hands_an_expired_lease_to_a_transaction: {} is not set",
            common::ENV
        );
    };
    let (store, owner, ws, refs) = setup(&db, 2).await;
    let all = FrontierFilter::default();
    let short = pad_store::ClaimRequest { ttl_seconds: Some(1), ..common::claim(owner, "w1", false) };
    let before = store.group_stats();
    let (first, _) = store.claim_next(&ws, &all, &short).await.unwrap().expect("an item is ready");
    assert_eq!(first.item_ref, refs[0]);
    let stats = store.group_stats();
    assert_eq!(stats, GroupStats { one_statement: before.one_statement + 1, ..before });

    // The database's clock: wait until the 1-second lease has expired there.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after_event = last_event(&store, &ws).await;
    let (again, outcome) =
        store.claim_next(&ws, &all, &common::claim(owner, "w2", false)).await.unwrap().expect("ready again");
    assert_eq!((again.item_ref.clone(), outcome.lease.holder.as_str()), (refs[0].clone(), "w2"));
    let kinds: Vec<_> = store.events_after(&ws, after_event, 1000).await.unwrap().iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [pad_core::EventKind::LeaseExpired, pad_core::EventKind::LeaseClaimed]);
    let after = store.group_stats();
    assert_eq!(after.to_transaction, stats.to_transaction + 1, "{after:?}");
    assert_eq!(after.one_statement, stats.one_statement, "{after:?}");

    // Two at once, the best with an expired lease and the next free: the
    // statement alone grants neither, the transaction grants both.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after_event = last_event(&store, &ws).await;
    store.release(&ws, &refs[0], &release(owner, "w2")).await.unwrap();
    store
        .claim(&ws, &refs[0], &pad_store::ClaimRequest { ttl_seconds: Some(1), ..common::claim(owner, "w3", false) })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let granted = store.claim_next_many(&ws, &all, &common::claim(owner, "w4", false), 2).await.unwrap();
    let granted: Vec<_> = granted.iter().map(|(item, o)| (item.item_ref.clone(), o.lease.holder.as_str())).collect();
    assert_eq!(granted, [(refs[0].clone(), "w4"), (refs[1].clone(), "w4")]);
    let events = store.events_after(&ws, after_event, 1000).await.unwrap();
    let expired = events.iter().filter(|e| e.kind == pad_core::EventKind::LeaseExpired).count();
    let claimed = events.iter().filter(|e| e.kind == pad_core::EventKind::LeaseClaimed).count();
    assert_eq!((expired, claimed), (1, 3), "w3's expiry, and the claims of w3 and w4 (twice): {events:?}");
    let last = store.group_stats();
    assert_eq!(last.to_transaction, after.to_transaction + 1, "{last:?}");
}

fn release(actor: Actor, holder: &str) -> pad_store::ReleaseRequest {
    pad_store::ReleaseRequest {
        actor,
        holder: holder.into(),
        handle: LeaseHandle::default(),
        force: false,
        reason: None,
        succeeded: false,
    }
}

/// A lease granted before lease ids existed has none (migration 0003 kept
/// such leases as they were): its release and its break still end it, with
/// the rule's event (lease id 0) and a break that tells its holder why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_without_a_lease_id_is_released_and_broken() {
    use sqlx::Connection;
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!("SKIPPED a_lease_without_a_lease_id_is_released_and_broken: {} is not set", common::ENV);
    };
    let (store, owner, ws, refs) = setup(&db, 2).await;
    for (i, r) in refs.iter().enumerate() {
        store.claim(&ws, r, &common::claim(owner, &format!("w{i}"), false)).await.unwrap();
    }
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::query("UPDATE items SET lease_id = NULL, lease_note_lease_id = NULL").execute(&mut conn).await.unwrap();
    let after = last_event(&store, &ws).await;

    let released = store.release(&ws, &refs[0], &release(owner, "w0")).await.unwrap();
    assert_eq!(released.reason, pad_store::ReleaseReason::Released);
    let brk = pad_store::ReleaseRequest { force: true, reason: Some("stuck".into()), ..release(owner, "ops") };
    assert_eq!(store.release(&ws, &refs[1], &brk).await.unwrap().reason, pad_store::ReleaseReason::Broken);
    let last = store.get_item(&ws, &refs[1]).await.unwrap().last_lease.unwrap();
    assert_eq!((last.reason.as_deref(), last.broken_by.as_deref()), (Some("stuck"), Some("owner@example.com")));
    let events = store.events_after(&ws, after, 1000).await.unwrap();
    let ids: Vec<_> = events.iter().map(|e| (e.kind, e.data["lease_id"].clone())).collect();
    assert_eq!(ids, [(pad_core::EventKind::LeaseReleased, 0.into()), (pad_core::EventKind::LeaseBroken, 0.into())]);
}

/// Queues a claim-next for one item under `holder` behind the hold, after
/// the `n` calls already queued, so the batch keeps this arrival order.
async fn queue_claim_next(
    store: &Arc<PgStore>, ws: &Workspace, req: pad_store::ClaimRequest, n: usize,
) -> tokio::task::JoinHandle<Result<Option<(pad_core::Item, pad_store::ClaimOutcome)>, StoreError>> {
    let (s, ws) = (Arc::clone(store), ws.clone());
    let handle = tokio::spawn(async move { s.claim_next(&ws, &FrontierFilter::default(), &req).await });
    queued(store, n + 1).await;
    handle
}

/// Claim-nexts with the same terms but the holder, queued together, are
/// made by one statement (docs/leases.md, "Claim-nexts made together"):
/// the best item to the first to arrive, each its own lease and
/// `lease.claimed`, and those left without an item answered "none", as
/// each alone would be. Over an expired lease they are made one by one,
/// which records the expiry once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_nexts_made_together_take_the_best_items_in_arrival_order() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED claim_nexts_made_together_take_the_best_items_in_arrival_order: {} is not set",
            common::ENV
        );
    };
    let (store, owner, ws, refs) = setup(&db, 3).await;
    let before = store.group_stats();
    let after_event = last_event(&store, &ws).await;

    store.hold_group();
    let mut nexts = Vec::new();
    for i in 0..5 {
        nexts.push(queue_claim_next(&store, &ws, common::claim(owner, &format!("n{i}"), false), i).await);
    }
    store.unhold_group();
    let mut answers = Vec::new();
    for next in nexts {
        answers.push(next.await.unwrap().unwrap().map(|(item, o)| (item.item_ref, o.lease.holder, o.lease.lease_id)));
    }
    let got: Vec<_> = answers.iter().map(|a| a.as_ref().map(|(r, h, _)| (r.clone(), h.clone()))).collect();
    let want: Vec<_> = (0..5).map(|i| refs.get(i).map(|r| (r.clone(), format!("n{i}")))).collect();
    assert_eq!(got, want, "the best item to the first claimant; none left for the last two");
    let after = store.group_stats();
    assert_eq!(after.claimed_together, before.claimed_together + 3, "three granted by one statement: {after:?}");
    assert_eq!(after.shared, before.shared + 1, "{after:?}");

    // Each grant is its own lease, committed, with its own event.
    let ids: HashSet<_> = answers.iter().flatten().map(|(_, _, id)| *id).collect();
    assert_eq!(ids.len(), 3, "a lease id per grant: {answers:?}");
    for (r, holder, _) in answers.iter().flatten() {
        let lease = store.get_item(&ws, r).await.unwrap().lease.expect("the grant committed");
        assert_eq!(&lease.holder, holder);
    }
    let events = store.events_after(&ws, after_event, 1000).await.unwrap();
    let claimed: Vec<_> = events
        .iter()
        .map(|e| (e.kind, e.item_ref.clone().unwrap(), e.data["holder"].as_str().unwrap().to_owned()))
        .collect();
    let want: Vec<_> =
        (0..3).map(|i| (pad_core::EventKind::LeaseClaimed, refs[i].to_string(), format!("n{i}"))).collect();
    assert_eq!(claimed, want);

    // refs[0]'s lease expires; two claimants together: the statement grants
    // nothing beside it, and the calls one by one record the expiry once.
    for (i, r) in refs.iter().enumerate().skip(1) {
        store.release(&ws, r, &release(owner, &format!("n{i}"))).await.unwrap();
    }
    store.release(&ws, &refs[0], &release(owner, "n0")).await.unwrap();
    let short = pad_store::ClaimRequest { ttl_seconds: Some(1), ..common::claim(owner, "s", false) };
    store.claim(&ws, &refs[0], &short).await.unwrap();
    // The database's clock: wait until the 1-second lease has expired there.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after_event = last_event(&store, &ws).await;
    store.hold_group();
    let first = queue_claim_next(&store, &ws, common::claim(owner, "x0", false), 0).await;
    let second = queue_claim_next(&store, &ws, common::claim(owner, "x1", false), 1).await;
    store.unhold_group();
    let first = first.await.unwrap().unwrap().expect("an item");
    let second = second.await.unwrap().unwrap().expect("an item");
    assert_eq!((first.0.item_ref.clone(), first.1.lease.holder.as_str()), (refs[0].clone(), "x0"));
    assert_eq!((second.0.item_ref.clone(), second.1.lease.holder.as_str()), (refs[1].clone(), "x1"));
    let kinds: Vec<_> = store.events_after(&ws, after_event, 1000).await.unwrap().iter().map(|e| e.kind).collect();
    use pad_core::EventKind::{LeaseClaimed, LeaseExpired};
    assert_eq!(kinds, [LeaseExpired, LeaseClaimed, LeaseClaimed]);
    assert_eq!(store.group_stats().claimed_together, after.claimed_together, "granted one by one");
}

/// A claim-next whose holder is not a valid name, queued with others of the
/// same terms, is refused `validation_failed` as it would be alone, and
/// nothing is granted under it; the others get their items.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_holder_among_claim_nexts_made_together_is_refused_alone() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED a_bad_holder_among_claim_nexts_made_together_is_refused_alone: {} is not set",
            common::ENV
        );
    };
    let (store, owner, ws, refs) = setup(&db, 3).await;
    store.hold_group();
    let good = queue_claim_next(&store, &ws, common::claim(owner, "good", false), 0).await;
    let bad = queue_claim_next(&store, &ws, common::claim(owner, "bad\nholder", false), 1).await;
    let also = queue_claim_next(&store, &ws, common::claim(owner, "also", false), 2).await;
    store.unhold_group();
    let good = good.await.unwrap().unwrap().expect("an item");
    let also = also.await.unwrap().unwrap().expect("an item");
    assert_eq!(good.1.lease.holder, "good");
    assert_eq!(also.1.lease.holder, "also");
    match bad.await.unwrap() {
        Err(StoreError::Validation(e)) => assert!(e.to_string().contains("holder"), "{e}"),
        other => panic!("expected a validation error on the holder, got {other:?}"),
    }
    for r in &refs {
        let item = store.get_item(&ws, r).await.unwrap();
        assert!(item.lease.as_ref().is_none_or(|l| l.holder != "bad\nholder"), "{r} granted to the bad holder");
    }
}

/// A claim-next whose caller went away (a request deadline, a closed
/// connection) while it was queued is not run: the caller was answered
/// `unavailable`, so a lease granted to it would hold the item for its
/// whole TTL with no one to work on it (docs/leases.md, "Lease calls that
/// share a transaction"). The live claim-next queued after it gets the
/// item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_call_whose_caller_is_gone_is_not_run() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!("SKIPPED a_queued_call_whose_caller_is_gone_is_not_run: {} is not set", common::ENV);
    };
    let (store, owner, ws, refs) = setup(&db, 1).await;
    let before = store.group_stats();

    store.hold_group();
    let gone = {
        let (store, ws, req) = (Arc::clone(&store), ws.clone(), common::claim(owner, "gone", false));
        tokio::spawn(async move { store.claim_next(&ws, &FrontierFilter::default(), &req).await })
    };
    queued(&store, 1).await;
    let live = {
        let (store, ws, req) = (Arc::clone(&store), ws.clone(), common::claim(owner, "live", false));
        tokio::spawn(async move { store.claim_next(&ws, &FrontierFilter::default(), &req).await })
    };
    queued(&store, 2).await;
    // The first caller goes: once its task is cancelled, its future (and
    // the receiving end of its answer) has been dropped.
    gone.abort();
    assert!(gone.await.unwrap_err().is_cancelled());
    store.unhold_group();

    let (item, outcome) = live.await.unwrap().unwrap().expect("the item was left for the live caller");
    assert_eq!((&item.item_ref, outcome.lease.holder.as_str()), (&refs[0], "live"));
    let item = store.get_item(&ws, &refs[0]).await.unwrap();
    assert_eq!(item.lease.expect("leased").holder, "live", "the gone caller holds nothing");
    let stats = store.group_stats();
    assert_eq!(stats.dropped, before.dropped + 1, "{stats:?}");
    assert_eq!(stats.shared, before.shared, "the live call ran alone: {stats:?}");
}

/// The claim-next `holder` makes with its complete.
fn next_for(owner: Actor, holder: &str) -> pad_store::NextClaim {
    pad_store::NextClaim { filter: FrontierFilter::default(), req: common::claim(owner, holder, false), count: 1 }
}

/// Completes that carry their next claim, queued together, share one
/// transaction with those claims: the completes are written together, the
/// claims made together after every end, each worker gets its next item,
/// and the events of the ends come before the grants'.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completes_carrying_their_next_claim_share_one_transaction() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED completes_carrying_their_next_claim_share_one_transaction: {} is not set",
            common::ENV
        );
    };
    let (store, owner, ws, refs) = setup(&db, 6).await;
    let epochs = claimed_by_workers(&store, &ws, owner, &refs[..3]).await;
    let (before, after_event) = (store.group_stats(), last_event(&store, &ws).await);

    store.hold_group();
    let mut calls = Vec::new();
    for (i, r) in refs[..3].iter().enumerate() {
        let holder = format!("w{i}");
        let (store, ws, r) = (Arc::clone(&store), ws.clone(), r.clone());
        let (req, next) = (done(owner, &holder, epochs[i]), next_for(owner, &holder));
        calls.push(tokio::spawn(async move { store.complete_then_claim(&ws, &r, &req, &next).await }));
    }
    queued(&store, 3).await;
    store.unhold_group();
    let mut taken = HashSet::new();
    for (i, call) in calls.into_iter().enumerate() {
        let (item, claimed) = call.await.unwrap().unwrap();
        assert_eq!((item.item_ref.clone(), item.status), (refs[i].clone(), Status::Done));
        let grants = claimed.unwrap();
        assert_eq!(grants.len(), 1, "w{i} got its next item");
        let (next, outcome) = &grants[0];
        assert_eq!(outcome.lease.holder, format!("w{i}"));
        assert!(refs[3..].contains(&next.item_ref), "{} is one of the ready items", next.item_ref);
        assert!(taken.insert(next.item_ref.clone()), "{} granted twice", next.item_ref);
    }
    let after = store.group_stats();
    assert_eq!((after.shared, after.shared_calls), (before.shared + 1, before.shared_calls + 3), "{after:?}");
    assert_eq!(after.completed_together, before.completed_together + 3, "{after:?}");
    assert_eq!(after.claimed_together, before.claimed_together + 3, "{after:?}");
    let kinds: Vec<_> = store.events_after(&ws, after_event, 1000).await.unwrap().iter().map(|e| e.kind).collect();
    let first_grant = kinds.iter().position(|k| *k == pad_core::EventKind::LeaseClaimed).unwrap();
    assert_eq!(first_grant, 6, "three ends' two events each, then the grants: {kinds:?}");
    assert_eq!(kinds.len(), 9, "{kinds:?}");
}

/// A complete that is refused makes no claim, in a batch or alone: its
/// caller is told the refusal and would never learn of a lease granted
/// with it. Its neighbour's complete and claim stand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_complete_makes_no_claim() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!("SKIPPED a_refused_complete_makes_no_claim: {} is not set", common::ENV);
    };
    let (store, owner, ws, refs) = setup(&db, 6).await;
    let epochs = claimed_by_workers(&store, &ws, owner, &refs[..2]).await;
    let before = store.group_stats();

    store.hold_group();
    let mut calls = Vec::new();
    for (i, r) in refs[..2].iter().enumerate() {
        let holder = format!("w{i}");
        // w1 names an epoch that never was.
        let epoch = if i == 1 { epochs[i] + 7 } else { epochs[i] };
        let (store, ws, r) = (Arc::clone(&store), ws.clone(), r.clone());
        let (req, next) = (done(owner, &holder, epoch), next_for(owner, &holder));
        calls.push(tokio::spawn(async move { store.complete_then_claim(&ws, &r, &req, &next).await }));
    }
    queued(&store, 2).await;
    store.unhold_group();
    let answers: Vec<_> = futures::future::join_all(calls).await.into_iter().map(|a| a.unwrap()).collect();
    let (item, claimed) = answers[0].as_ref().unwrap();
    assert_eq!(item.status, Status::Done);
    assert_eq!(claimed.as_ref().unwrap().len(), 1, "w0's next item");
    assert!(matches!(answers[1], Err(StoreError::LeaseLost { .. })), "{:?}", answers[1]);
    assert_eq!(store.group_stats().rerun, before.rerun + 1, "the batch ran again alone");
    // Alone as well: refused, and no claim.
    let stale = done(owner, "w1", epochs[1] + 7);
    let alone = store.complete_then_claim(&ws, &refs[1], &stale, &next_for(owner, "w1")).await;
    assert!(matches!(alone, Err(StoreError::LeaseLost { .. })), "{alone:?}");
    let mut held_by_w1 = Vec::new();
    for r in &refs {
        let item = store.get_item(&ws, r).await.unwrap();
        if item.lease.as_ref().is_some_and(|l| l.holder == "w1") {
            held_by_w1.push(item.item_ref);
        }
    }
    assert_eq!(held_by_w1, vec![refs[1].clone()], "w1 holds only the item it had");
}

/// A fail and a release that carry their next claim ride with it as a
/// complete does: one shared transaction, the claims made after both ends,
/// and a refused release makes no claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fails_and_releases_carry_their_next_claim_too() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!("SKIPPED fails_and_releases_carry_their_next_claim_too: {} is not set", common::ENV);
    };
    let (store, owner, ws, refs) = setup(&db, 6).await;
    let epochs = claimed_by_workers(&store, &ws, owner, &refs[..2]).await;
    let handle = |epoch| LeaseHandle { epoch: Some(epoch), lease_id: None };
    let fail = pad_store::FailRequest {
        actor: owner,
        holder: "w0".into(),
        handle: handle(epochs[0]),
        note: Some("try later".into()),
        max_failures: None,
    };
    let release = |epoch| pad_store::ReleaseRequest {
        actor: owner,
        holder: "w1".into(),
        handle: handle(epoch),
        force: false,
        reason: None,
        succeeded: true,
    };
    let before = store.group_stats();

    store.hold_group();
    let failed = {
        let (store, ws, r, next) = (Arc::clone(&store), ws.clone(), refs[0].clone(), next_for(owner, "w0"));
        tokio::spawn(async move { store.fail_then_claim(&ws, &r, &fail, &next).await })
    };
    let released = {
        // A released item is ready again at once: the claim leaves it out.
        let mut next = next_for(owner, "w1");
        next.filter.exclude = vec![refs[1].to_string()];
        let (store, ws, r, req) = (Arc::clone(&store), ws.clone(), refs[1].clone(), release(epochs[1]));
        tokio::spawn(async move { store.release_then_claim(&ws, &r, &req, &next).await })
    };
    queued(&store, 2).await;
    store.unhold_group();
    let (out, claimed) = failed.await.unwrap().unwrap();
    assert_eq!(out.item.item_ref, refs[0]);
    let w0_next = claimed.unwrap().pop().expect("w0's next item").0.item_ref;
    let (out, claimed) = released.await.unwrap().unwrap();
    assert!(out.released(), "{out:?}");
    let w1_next = claimed.unwrap().pop().expect("w1's next item").0.item_ref;
    assert_ne!(w0_next, w1_next);
    // The failed item waits for its retry; the released one is ready again
    // (w0 may take it: the release is written before the claims are made).
    assert!(w0_next != refs[0] && w1_next != refs[1] && w1_next != refs[0], "{w0_next} {w1_next}");
    let after = store.group_stats();
    assert_eq!((after.shared, after.shared_calls), (before.shared + 1, before.shared_calls + 2), "{after:?}");
    // Their filters differ (w1's leaves its item out), so the two claims
    // were made one after the other in that transaction.
    assert_eq!(after.claimed_together, before.claimed_together, "{after:?}");

    // A release that names an epoch that never was is refused and claims
    // nothing.
    let refused = store.release_then_claim(&ws, &w1_next, &release(epochs[1] + 7), &next_for(owner, "w1")).await;
    assert!(refused.is_err(), "{refused:?}");
    let mut held_by_w1 = Vec::new();
    for r in &refs {
        if store.get_item(&ws, r).await.unwrap().lease.is_some_and(|l| l.holder == "w1") {
            held_by_w1.push(r.clone());
        }
    }
    assert_eq!(held_by_w1, vec![w1_next], "w1 holds only the item it was granted");
}
