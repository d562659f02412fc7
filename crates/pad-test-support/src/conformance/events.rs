//! The event log (docs/api.md, "Events"): what each change records, in
//! order, gap-free under concurrent writers, and its filters.

use std::sync::Arc;
use std::time::Duration;

use pad_core::ItemPatch;
use pad_core::lease::LeaseHandle;
use pad_store::Store;

use super::{Fixture, event_types, rf};

pub async fn events_record_changes_in_order(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    f.store
        .update_item(&f.ws, f.owner, &rf("TASK-1"), &ItemPatch { title: Some("b".into()), ..Default::default() })
        .await
        .unwrap();
    let l = f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap().lease;
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap();
    f.store.renew(&f.ws, &rf("TASK-1"), &f.renew("w", l.epoch)).await.unwrap();
    f.store.add_comment(&f.ws, f.owner, &rf("TASK-1"), "hi").await.unwrap();
    f.store.release(&f.ws, &rf("TASK-1"), &f.release("w")).await.unwrap();
    f.store.delete_item(&f.ws, f.owner, &rf("TASK-1"), LeaseHandle::default()).await.unwrap();
    f.store.restore_item(&f.ws, f.owner, &rf("TASK-1")).await.unwrap();
    assert_eq!(
        event_types(&f).await,
        [
            "item.created",
            "item.updated",
            "lease.claimed",
            "comment.created",
            "lease.released",
            "item.deleted",
            "item.restored"
        ]
    );
    let events = f.store.events_after(&f.ws, 0, 1000).await.unwrap();
    assert!(events.windows(2).all(|w| w[0].id < w[1].id));
    assert_eq!(events[2].data["holder"], "w");
    assert_eq!(events[2].actor.as_deref(), Some("owner@example.com"));
    let after = f.store.events_after(&f.ws, events[4].id, 10).await.unwrap();
    assert_eq!(after.iter().map(|e| e.id).collect::<Vec<_>>(), [events[5].id, events[6].id]);
    // Events are per workspace.
    let other = f.store.create_workspace("other", "Other", f.owner).await.unwrap();
    assert!(f.store.events_after(&other, 0, 10).await.unwrap().is_empty());
}

/// Ids become visible in increasing order (docs/api.md, Events), so a
/// reader paging with `after = the last id it saw` (an SSE stream resuming
/// from `Last-Event-ID`) while many transactions write events at once ends
/// with exactly the whole log: nothing skipped, nothing twice.
pub async fn events_are_gap_free_under_concurrent_writers(store: Arc<dyn Store>) {
    const WRITERS: usize = 16;
    const CYCLES: usize = 12;
    // Each cycle writes `lease.claimed` and `lease.released`.
    const EXPECTED: usize = WRITERS * CYCLES * 2;
    let f = Arc::new(Fixture::new(store).await);
    let mut refs = Vec::new();
    for i in 0..WRITERS {
        refs.push(f.item(&format!("w{i}")).await.item_ref.to_string());
    }
    let start = f.store.events_after(&f.ws, 0, 1000).await.unwrap().last().map_or(0, |e| e.id);
    let reader = {
        let f = f.clone();
        tokio::spawn(async move {
            let (mut seen, mut cursor) = (Vec::new(), start);
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            while seen.len() < EXPECTED && tokio::time::Instant::now() < deadline {
                let page = f.store.events_after(&f.ws, cursor, 1000).await.unwrap();
                for e in page {
                    assert!(e.id > cursor, "event {} after cursor {cursor}", e.id);
                    cursor = e.id;
                    seen.push(e.id);
                }
                tokio::task::yield_now().await;
            }
            seen
        })
    };
    let writers: Vec<_> = refs
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let f = f.clone();
            tokio::spawn(async move {
                for _ in 0..CYCLES {
                    f.store.claim(&f.ws, &rf(&r), &f.claim(&format!("w{i}"), 60)).await.unwrap();
                    f.store.release(&f.ws, &rf(&r), &f.release(&format!("w{i}"))).await.unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let seen = reader.await.unwrap();
    let all: Vec<i64> = f.store.events_after(&f.ws, start, 1000).await.unwrap().iter().map(|e| e.id).collect();
    assert_eq!(all.len(), EXPECTED, "every cycle's two events are in the log");
    let missed: Vec<_> = all.iter().filter(|id| !seen.contains(id)).collect();
    assert!(missed.is_empty(), "the paging reader skipped {} events: {missed:?}", missed.len());
    assert_eq!(seen, all, "the reader saw the log in id order, each event once");
}

/// `events?ref=&type=`.
pub async fn events_filter_by_ref_and_type(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    f.item("a").await;
    f.item("b").await;
    f.store.claim(&f.ws, &rf("TASK-1"), &f.claim("w", 60)).await.unwrap();
    f.store.claim(&f.ws, &rf("TASK-2"), &f.claim("w", 60)).await.unwrap();
    f.store.release(&f.ws, &rf("TASK-2"), &f.release("w")).await.unwrap();
    let r = |s: &str| Some(s.parse().unwrap());
    let only = |item_ref, kinds| pad_core::EventFilter { item_ref, kinds };
    let f = &f;
    let kinds = |filter| async move {
        let events = f.store.events_where(&f.ws, 0, 100, &filter).await.unwrap();
        events.iter().map(|e| format!("{} {}", e.item_ref.clone().unwrap_or_default(), e.kind)).collect::<Vec<_>>()
    };
    assert_eq!(
        kinds(only(r("task-2"), vec![])).await,
        ["TASK-2 item.created", "TASK-2 lease.claimed", "TASK-2 lease.released"]
    );
    use pad_core::EventKind::{LeaseClaimed, LeaseReleased};
    assert_eq!(kinds(only(None, vec![LeaseClaimed])).await, ["TASK-1 lease.claimed", "TASK-2 lease.claimed"]);
    assert_eq!(
        kinds(only(r("TASK-2"), vec![LeaseClaimed, LeaseReleased])).await,
        ["TASK-2 lease.claimed", "TASK-2 lease.released"]
    );
    assert!(kinds(only(r("TASK-9"), vec![])).await.is_empty());
}
