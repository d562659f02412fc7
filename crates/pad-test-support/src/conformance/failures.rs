//! Failures and deferral (docs/leases.md L14, L16, "Requeue"): a failure
//! counts and backs off, quarantines at the threshold, a success clears its
//! handoff, requeue clears it all, and `not_before` defers.

use std::sync::Arc;
use std::time::Duration;

use pad_core::lease::{LeaseEnd, LeaseHandle};
use pad_core::{FrontierFilter, ItemPatch, NEEDS_HUMAN, NewItem, Status};
use pad_store::{ReleaseRequest, Store, StoreError};

use super::{Fixture, events_of, held_by, lost, pass, refs, rf};

/// L14: a failure ends the lease, counts, keeps the note for the next
/// claimant, and keeps the item from claim-next and the frontier until
/// `retry_at`; a claim by ref still works.
pub async fn l14_fail_counts_backs_off_and_hands_the_note_over(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("flaky").await;
    f.item("other").await;
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-a", 60)).await.unwrap().lease;
    let out =
        f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("runner-a", LeaseHandle::epoch(l.epoch), Some("disk full"))).await;
    let out = out.unwrap();
    assert!(!out.quarantined);
    let item = f.get("TASK-1").await;
    assert_eq!(out.item, item);
    assert_eq!((item.failures, item.lease.as_ref()), (1, None));
    assert_eq!(item.last_failure_note.as_deref(), Some("disk full"));
    let now = f.store.now().await.unwrap();
    let wait = item.retry_at.expect("retry_at is set") - now;
    assert!(wait > chrono::Duration::seconds(25) && wait <= chrono::Duration::seconds(30), "{wait}");
    let last = item.last_lease.expect("the failed lease is the last lease");
    assert_eq!((last.ended, last.epoch, last.lease_id), (LeaseEnd::Failed, l.epoch, l.lease_id));
    assert_eq!(last.note.as_deref(), Some("disk full"));
    // Lease is not content (L9): no version, `updated_at` unchanged.
    assert_eq!(f.store.history(&f.ws, &rf("TASK-1")).await.unwrap().len(), 1);
    assert_eq!(item.updated_at, f.get("TASK-1").await.updated_at);
    assert_eq!(refs(&f.store.frontier(&f.ws, &FrontierFilter::default(), 10).await.unwrap()), ["TASK-2"]);
    let (next, _) = f.store.claim_next(&f.ws, &FrontierFilter::default(), &f.claim("b", 60)).await.unwrap().unwrap();
    assert_eq!(next.item_ref.to_string(), "TASK-2");
    assert!(f.store.claim_next(&f.ws, &FrontierFilter::default(), &f.claim("c", 60)).await.unwrap().is_none());
    let again = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("runner-b", 60)).await.unwrap();
    assert_eq!(again.previous_note.as_deref(), Some("disk full"));
    assert_eq!(again.previous_holder.as_deref(), Some("runner-a"));
    // The second failure doubles the wait.
    let l2 = again.lease;
    let out = f
        .store
        .fail(&f.ws, &rf("TASK-1"), &f.fail("runner-b", LeaseHandle::lease_id(l2.lease_id), None))
        .await
        .unwrap();
    assert_eq!(out.item.failures, 2);
    let wait = out.item.retry_at.unwrap() - f.store.now().await.unwrap();
    assert!(wait > chrono::Duration::seconds(55) && wait <= chrono::Duration::seconds(60), "{wait}");
    assert_eq!(out.item.last_failure_note, None);
    let failed = events_of(&f, pad_core::EventKind::LeaseFailed).await;
    assert_eq!(failed.len(), 2);
    assert_eq!((failed[0].data["note"].as_str(), failed[0].data["failures"].as_i64()), (Some("disk full"), Some(1)));
}

/// L14 bad input: a stale epoch, another item's lease id, another holder,
/// or no handle at all: refused, and nothing changed.
pub async fn l14_fail_with_a_stale_handle_is_lost_and_changes_nothing(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    f.item("b").await;
    let a = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    let b = f.store.claim(&f.ws, &rf("TASK-2"), &f.claim("w", 60)).await.unwrap().lease;
    let before = f.get("TASK-1").await;
    let events = f.store.events_after(&f.ws, 0, 1000).await.unwrap().len();
    lost(
        f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("w", LeaseHandle::epoch(a.epoch + 1), Some("x"))).await.unwrap_err(),
    );
    lost(f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("w", LeaseHandle::lease_id(b.lease_id), None)).await.unwrap_err());
    let mixed = LeaseHandle { epoch: Some(a.epoch), lease_id: Some(b.lease_id) };
    lost(f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("w", mixed, None)).await.unwrap_err());
    assert_eq!(
        held_by(f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("v", LeaseHandle::epoch(a.epoch), None)).await.unwrap_err()),
        "w"
    );
    let e = f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("w", LeaseHandle::default(), None)).await.unwrap_err();
    assert!(matches!(&e, StoreError::Validation(v) if v.field == "epoch"), "{e:?}");
    let mut zero = f.fail("w", LeaseHandle::epoch(a.epoch), None);
    zero.max_failures = Some(0);
    let e = f.store.fail(&f.ws, &rf("TASK-1"), &zero).await.unwrap_err();
    assert!(matches!(&e, StoreError::Validation(v) if v.field == "max_failures"), "{e:?}");
    assert_eq!(f.get("TASK-1").await, before);
    assert_eq!(f.store.events_after(&f.ws, 0, 1000).await.unwrap().len(), events);
    // Released, the old handle is lost too.
    f.store.release(&f.ws, &rf("TASK-1"), &f.release("w")).await.unwrap();
    lost(f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("w", LeaseHandle::lease_id(a.lease_id), None)).await.unwrap_err());
    assert_eq!(f.get("TASK-1").await.failures, 0);
}

/// L14: at the threshold (here a per-request `max_failures`) the item is
/// quarantined with `needs-human` and an event that says why; a claim by
/// ref still works during the backoff.
pub async fn l14_failures_quarantine_at_the_threshold(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("doomed").await;
    for round in 1..=2 {
        let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
        let mut req = f.fail("w", LeaseHandle::epoch(l.epoch), Some("exit 1"));
        req.max_failures = Some(2);
        let out = f.store.fail(&f.ws, &rf("TASK-1"), &req).await.unwrap();
        assert_eq!(out.quarantined, round == 2, "round {round}");
    }
    let item = f.get("TASK-1").await;
    assert!(item.labels.iter().any(|l| l == NEEDS_HUMAN), "{:?}", item.labels);
    let q = events_of(&f, pad_core::EventKind::ItemQuarantined).await;
    assert_eq!(q.len(), 1);
    assert!(q[0].data["reason"].as_str().unwrap().contains("failed 2 times"), "{}", q[0].data);
    // The workspace default (3) applies without an override.
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    let out = f.store.fail(&f.ws, &rf("TASK-1"), &f.fail("w", LeaseHandle::epoch(l.epoch), None)).await.unwrap();
    assert!(!out.quarantined, "already labelled");
    assert_eq!(out.item.failures, 3);
}

/// L13/L14: quarantine labels an item even when it has the 50 labels an
/// update may leave, and the item stays editable: an update is refused for
/// labels only when it leaves more than 50 *and* more than the item had
/// (docs/api.md, "Limits"), so a title edit passes and adding a label does not.
pub async fn l14_a_quarantined_item_with_fifty_labels_stays_editable(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let labels: Vec<String> = (0..50).map(|i| format!("l{i}")).collect();
    let new = NewItem { title: "full".into(), labels, ..Default::default() };
    f.store.create_item(&f.ws, f.owner, &new).await.unwrap();
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    let mut req = f.fail("w", LeaseHandle::epoch(l.epoch), Some("exit 1"));
    req.max_failures = Some(1);
    assert!(f.store.fail(&f.ws, &rf("TASK-1"), &req).await.unwrap().quarantined);
    assert_eq!(f.get("TASK-1").await.labels.len(), 51);

    let retitle = ItemPatch { title: Some("still full".into()), ..Default::default() };
    let item = f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &retitle).await.unwrap();
    assert_eq!((item.title.as_str(), item.labels.len()), ("still full", 51));
    let more = ItemPatch { add_labels: vec!["one-more".into()], ..Default::default() };
    let err = f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &more).await.unwrap_err();
    assert!(matches!(&err, StoreError::Validation(v) if v.field == "labels"), "{err:?}");
    let swap = ItemPatch { add_labels: vec!["swapped".into()], remove_labels: vec!["l0".into()], ..Default::default() };
    let item = f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &swap).await.unwrap();
    assert_eq!(item.labels.len(), 51);
    assert!(item.labels.iter().any(|l| l == NEEDS_HUMAN));
}

/// Requeue (docs/leases.md): `needs-human`, the failure and expiry counts and
/// the backoff go in one recorded version; a second requeue changes nothing.
pub async fn requeue_clears_quarantine_counts_and_backoff(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("doomed").await;
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 1)).await.unwrap();
    pass(Duration::from_millis(1100)).await;
    assert_eq!(f.store.observe_expiries().await.unwrap().len(), 1);
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    let mut req = f.fail("w", LeaseHandle::epoch(l.epoch), Some("exit 1"));
    req.max_failures = Some(1);
    let out = f.store.fail(&f.ws, &rf("TASK-1"), &req).await.unwrap();
    assert!(out.quarantined && out.item.retry_at.is_some());
    let versions = f.store.history(&f.ws, &rf("TASK-1")).await.unwrap().len();

    let item = f.store.requeue(&f.ws, f.owner, &rf("task-1")).await.unwrap();
    assert!(!item.labels.iter().any(|l| l == NEEDS_HUMAN), "{:?}", item.labels);
    assert_eq!((item.failures, item.retry_at), (0, None));
    assert_eq!(item, f.get("TASK-1").await);
    assert_eq!(item.last_failure_note.as_deref(), Some("exit 1"), "the note stays for the next worker");
    let history = f.store.history(&f.ws, &rf("TASK-1")).await.unwrap();
    assert_eq!(history.len(), versions + 1);
    let last = history.iter().max_by_key(|v| v.version).unwrap();
    assert_eq!(last.changes["requeued"], serde_json::json!({ "expiries": 1, "failures": 1 }), "{}", last.changes);
    assert_eq!(last.actor, "owner@example.com");
    // Nothing left to clear: the expiry count went too.
    assert_eq!(f.store.requeue(&f.ws, f.owner, &rf("TASK-1")).await.unwrap(), item);
    assert_eq!(f.store.history(&f.ws, &rf("TASK-1")).await.unwrap().len(), versions + 1);
    assert!(matches!(f.store.requeue(&f.ws, f.owner, &rf("TASK-99")).await, Err(StoreError::NotFound { .. })));
}

/// L16: `not_before` keeps an item off claim-next and the frontier until
/// then; `null` clears it; a past time does not defer.
pub async fn l16_not_before_defers_claim_next_and_frontier(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let now = f.store.now().await.unwrap();
    let later = now + chrono::Duration::hours(1);
    let new = |title: &str, at| NewItem { title: title.into(), not_before: Some(at), ..Default::default() };
    let deferred = f.store.create_item(&f.ws, f.owner, &new("later", later)).await.unwrap();
    assert_eq!(deferred.not_before, Some(later));
    f.store.create_item(&f.ws, f.owner, &new("past", now - chrono::Duration::seconds(1))).await.unwrap();
    let all = FrontierFilter::default();
    assert_eq!(refs(&f.store.frontier(&f.ws, &all, 10).await.unwrap()), ["TASK-2"]);
    let (got, _) = f.store.claim_next(&f.ws, &all, &f.claim("w", 60)).await.unwrap().unwrap();
    assert_eq!(got.item_ref.to_string(), "TASK-2");
    assert!(f.store.claim_next(&f.ws, &all, &f.claim("w", 60)).await.unwrap().is_none());
    // Clearing it is a content change with a version.
    let clear = ItemPatch { not_before: Some(None), ..Default::default() };
    let item = f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &clear).await.unwrap();
    assert_eq!(item.not_before, None);
    assert!(f.store.history(&f.ws, &rf("TASK-1")).await.unwrap()[0].changes.get("not_before").is_some());
    assert_eq!(refs(&f.store.frontier(&f.ws, &all, 10).await.unwrap()), ["TASK-1"]);
    let defer = ItemPatch { not_before: Some(Some(later)), ..Default::default() };
    f.store.update_item(&f.ws, f.owner, &rf("TASK-1"), &defer).await.unwrap();
    assert!(f.store.frontier(&f.ws, &all, 10).await.unwrap().is_empty());
    // A claim by ref is not deferred: a person asked for that item.
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap();
}

/// L14 (docs/leases.md, "News that is true"): a success — a release that
/// says so, or a complete — clears the failure's handoff note and backoff,
/// and records when; the failure count and last failure note stay as
/// history, older than the success.
pub async fn l14_a_success_clears_the_failure_handoff(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    for t in ["released after success", "completed after success"] {
        f.item(t).await;
    }
    for (r, complete) in [("TASK-1", false), ("TASK-2", true)] {
        let l = f.store.claim(&f.ws, &rf(r), &f.claim("w", 60)).await.unwrap().lease;
        f.store.fail(&f.ws, &rf(r), &f.fail("w", LeaseHandle::epoch(l.epoch), Some("`make` exited 2"))).await.unwrap();
        // A claim by ref ignores the backoff; it is told of the failure.
        let again = f.store.claim(&f.ws, &rf(r), &f.claim("w", 60)).await.unwrap();
        assert_eq!(again.previous_note.as_deref(), Some("`make` exited 2"));
        pass(Duration::from_millis(5)).await;
        if complete {
            f.store.complete(&f.ws, &rf(r), &f.complete("w", LeaseHandle::epoch(again.lease.epoch))).await.unwrap();
            f.store
                .update_item(&f.ws, f.owner, &rf(r), &ItemPatch { status: Some(Status::Open), ..Default::default() })
                .await
                .unwrap();
        } else {
            let ok =
                ReleaseRequest { succeeded: true, handle: LeaseHandle::epoch(again.lease.epoch), ..f.release("w") };
            assert!(f.store.release(&f.ws, &rf(r), &ok).await.unwrap().released());
        }
        let item = f.get(r).await;
        let (failed, succeeded) = (item.last_failure_at.unwrap(), item.last_success_at.expect("a success is recorded"));
        assert!(succeeded > failed, "{r}: the success is the news");
        assert_eq!((item.failures, item.retry_at), (1, None), "{r}: the count stays, the backoff goes");
        assert_eq!(item.last_failure_note.as_deref(), Some("`make` exited 2"), "{r}: history kept");
        let next = f.store.claim(&f.ws, &rf(r), &f.claim("v", 60)).await.unwrap();
        assert_eq!(next.previous_note, None, "{r}: no stale handoff after a success");
    }
    // A plain release (not a success) keeps the handoff.
    f.item("plain").await;
    let l = f.store.claim(&f.ws, &rf("TASK-3"), &f.claim("w", 60)).await.unwrap().lease;
    f.store.fail(&f.ws, &rf("TASK-3"), &f.fail("w", LeaseHandle::epoch(l.epoch), Some("flaky"))).await.unwrap();
    f.store.claim(&f.ws, &rf("TASK-3"), &f.claim("w", 60)).await.unwrap();
    f.store.release(&f.ws, &rf("TASK-3"), &f.release("w")).await.unwrap();
    let next = f.store.claim(&f.ws, &rf("TASK-3"), &f.claim("v", 60)).await.unwrap();
    assert_eq!(next.previous_note.as_deref(), Some("flaky"));
    assert_eq!(f.get("TASK-3").await.last_success_at, None);
}
