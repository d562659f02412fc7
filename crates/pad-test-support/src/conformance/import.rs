//! Import (docs/api.md, "Import"): one transaction, all or nothing, and a
//! key that writes once.

use std::sync::Arc;

use pad_core::{Item, ItemFilter, NewItem, Status};
use pad_store::{Deadline, Store, StoreError};

use super::{Fixture, rf};

/// An import of `n` tasks `T-1`…, each blocked by the one before, the last
/// also a child of the first, with a new kind for the first.
fn import_request(key: &str, n: usize) -> pad_core::api::ImportRequest {
    use pad_core::api::{CreateKind, ImportItem, ImportRequest};
    let items = (1..=n)
        .map(|i| ImportItem {
            file_ref: format!("T-{i}"),
            item: NewItem {
                title: format!("imported {i}"),
                kind: Some(if i == 1 { "spike" } else { "task" }.into()),
                ..Default::default()
            },
            status: if i == 2 { Status::Done } else { Status::Open },
            parent: (i == n && n > 1).then(|| "T-1".to_string()),
            blocked_by: if i > 1 { vec![format!("T-{}", i - 1)] } else { vec![] },
            comments: if i == 1 { vec!["from the old tracker".into()] } else { vec![] },
            deleted: i == 3,
        })
        .collect();
    ImportRequest {
        import_key: key.into(),
        kinds: vec![CreateKind { name: "spike".into(), prefix: "SPK".into() }],
        items,
    }
}

async fn all_items(f: &Fixture) -> Vec<Item> {
    let filter = ItemFilter { include_deleted: true, ..Default::default() };
    f.store.list_items(&f.ws, &filter, 500, None).await.unwrap().items
}

/// docs/api.md, "Import": an item that fails half-way (here a blocker
/// cycle, found only when the links are written) undoes the whole import:
/// no item, kind, comment or event stays, no number is used up, and the key
/// is not taken.
pub async fn import_is_all_or_nothing(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let mut req = import_request("k1", 6);
    req.items[1].blocked_by = vec!["T-5".into()]; // T-2 → T-5 → T-4 → T-3 → T-2
    let events_before = f.store.events_after(&f.ws, 0, 1000).await.unwrap().len();
    let err = f.store.import(&f.ws, f.owner, &req, &Deadline::none()).await.unwrap_err();
    assert!(matches!(&err, StoreError::Validation(v) if v.field.starts_with("items[")), "{err:?}");
    assert!(all_items(&f).await.is_empty(), "a failed import left items behind");
    assert!(!f.store.list_kinds(&f.ws).await.unwrap().iter().any(|k| k.name == "spike"), "the kind stayed");
    assert_eq!(f.store.events_after(&f.ws, 0, 1000).await.unwrap().len(), events_before, "events stayed");
    // A bad request is refused before the store is touched, naming the place.
    let mut bad = import_request("k1", 3);
    bad.items[2].item.title = String::new();
    let err = f.store.import(&f.ws, f.owner, &bad, &Deadline::none()).await.unwrap_err();
    assert!(matches!(&err, StoreError::Validation(v) if v.field == "items[2].item.title"), "{err:?}");
    // An assignee who is not a member fails at the write, naming the item.
    let mut stranger = import_request("k1", 3);
    stranger.items[2].item.assignee = Some("nobody@example.com".into());
    let err = f.store.import(&f.ws, f.owner, &stranger, &Deadline::none()).await.unwrap_err();
    assert!(matches!(&err, StoreError::Validation(v) if v.field == "items[2].item.assignee"), "{err:?}");
    assert!(all_items(&f).await.is_empty());

    // The same key, fixed: imported whole, with the numbers the failed
    // attempts never used.
    let done = f.store.import(&f.ws, f.owner, &import_request("k1", 6), &Deadline::none()).await.unwrap();
    assert!(!done.replayed);
    let refs: Vec<(&str, &str)> = done.refs.iter().map(|r| (r.from.as_str(), r.to.as_str())).collect();
    assert_eq!(
        refs,
        [
            ("T-1", "SPK-1"),
            ("T-2", "TASK-1"),
            ("T-3", "TASK-2"),
            ("T-4", "TASK-3"),
            ("T-5", "TASK-4"),
            ("T-6", "TASK-5")
        ]
    );
    let items = all_items(&f).await;
    assert_eq!(items.len(), 6);
    let get = |r: &str| {
        let (store, ws, r) = (f.store.clone(), f.ws.clone(), rf(r));
        async move { store.get_item(&ws, &r).await }
    };
    let last = get("TASK-5").await.unwrap();
    assert_eq!(last.parent.map(|p| p.to_string()).as_deref(), Some("SPK-1"));
    assert_eq!(last.blocked_by.iter().map(ToString::to_string).collect::<Vec<_>>(), ["TASK-4"]);
    assert_eq!(get("TASK-1").await.unwrap().status, Status::Done);
    assert!(get("TASK-2").await.unwrap().deleted_at.is_some());
    let comments = f.store.list_comments(&f.ws, &rf("SPK-1")).await.unwrap();
    assert_eq!(comments.iter().map(|c| c.body.as_str()).collect::<Vec<_>>(), ["from the old tracker"]);
}

/// docs/api.md, "Import": a key the workspace has imported before answers
/// the first import's result and writes nothing; another workspace's key
/// space is its own.
pub async fn import_with_a_seen_key_writes_nothing(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let first = f.store.import(&f.ws, f.owner, &import_request("sha256:abc", 4), &Deadline::none()).await.unwrap();
    let events = f.store.events_after(&f.ws, 0, 1000).await.unwrap().len();
    let again = f.store.import(&f.ws, f.editor, &import_request("sha256:abc", 4), &Deadline::none()).await.unwrap();
    assert!(again.replayed);
    assert_eq!((again.refs.clone(), again.imported, again.created_at), (first.refs.clone(), 4, first.created_at));
    assert_eq!(all_items(&f).await.len(), 4, "a replay created items");
    assert_eq!(f.store.events_after(&f.ws, 0, 1000).await.unwrap().len(), events, "a replay wrote events");
    // Concurrent imports of one key: one writes, the others replay it.
    let runs = (0..4).map(|_| {
        let (store, ws, owner) = (f.store.clone(), f.ws.clone(), f.owner);
        tokio::spawn(async move {
            store.import(&ws, owner, &import_request("sha256:def", 4), &Deadline::none()).await.unwrap()
        })
    });
    let results: Vec<_> = futures_join(runs).await;
    assert_eq!(results.iter().filter(|r| !r.replayed).count(), 1, "{results:?}");
    assert_eq!(all_items(&f).await.len(), 8);
    // The same key in another workspace is another import.
    let other = f.store.create_workspace("other", "Other", f.owner).await.unwrap();
    let there = f.store.import(&other, f.owner, &import_request("sha256:abc", 4), &Deadline::none()).await.unwrap();
    assert!(!there.replayed);
}

/// docs/api.md, "Import": an import whose request deadline has passed
/// rolls back and fails `unavailable`, so the server's `503` for it is true:
/// no item, kind, comment or event stays, and the key is not taken. The
/// deadline here has passed before the import starts, so the import notices
/// after its first item whatever the machine's speed.
pub async fn import_past_its_deadline_commits_nothing(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let events_before = f.store.events_after(&f.ws, 0, 1000).await.unwrap().len();
    let late = Deadline::at(std::time::Instant::now());
    let err = f.store.import(&f.ws, f.owner, &import_request("late", 6), &late).await.unwrap_err();
    assert!(matches!(&err, StoreError::Unavailable(m) if m.contains("deadline")), "{err:?}");
    assert!(all_items(&f).await.is_empty(), "an import past its deadline left items behind");
    assert!(!f.store.list_kinds(&f.ws).await.unwrap().iter().any(|k| k.name == "spike"), "the kind stayed");
    assert_eq!(f.store.events_after(&f.ws, 0, 1000).await.unwrap().len(), events_before, "events stayed");
    // The request was answered as late while the import ran: it rolls back too.
    let answered = Deadline::after(std::time::Duration::from_secs(3600));
    assert!(answered.expire());
    let err = f.store.import(&f.ws, f.owner, &import_request("late", 6), &answered).await.unwrap_err();
    assert!(matches!(&err, StoreError::Unavailable(_)), "{err:?}");
    assert!(all_items(&f).await.is_empty(), "an import answered as late left items behind");
    // The key was not taken: the same import, in time, writes.
    let done = f.store.import(&f.ws, f.owner, &import_request("late", 6), &Deadline::none()).await.unwrap();
    assert!(!done.replayed);
    assert_eq!(done.refs[0].to, "SPK-1", "the late attempts used up no number");
}

/// docs/api.md, "Import": a file whose links would make a cycle is refused
/// naming the item that closes it, with the message an update gets, and
/// writes nothing; parents and blockers alike, an item's own ref included.
pub async fn import_refuses_link_cycles_naming_the_item(store: Arc<dyn Store>) {
    let f = Fixture::new(store).await;
    let events_before = f.store.events_after(&f.ws, 0, 1000).await.unwrap().len();
    let mut parents = import_request("p", 4);
    parents.items[0].parent = Some("T-4".into()); // T-1 under T-4, T-4 under T-1
    let err = f.store.import(&f.ws, f.owner, &parents, &Deadline::none()).await.unwrap_err();
    let StoreError::Validation(v) = &err else { panic!("{err:?}") };
    assert_eq!(v.field, "items[3].parent", "{v:?}");
    assert!(v.message.contains("is a descendant of"), "{v:?}");

    let mut own = import_request("o", 3);
    own.items[1].parent = Some("T-2".into());
    let err = f.store.import(&f.ws, f.owner, &own, &Deadline::none()).await.unwrap_err();
    assert!(matches!(&err, StoreError::Validation(v) if v.field == "items[1].parent"), "{err:?}");

    let mut itself = import_request("s", 3);
    itself.items[2].blocked_by.push("T-3".into());
    let err = f.store.import(&f.ws, f.owner, &itself, &Deadline::none()).await.unwrap_err();
    let StoreError::Validation(v) = &err else { panic!("{err:?}") };
    assert_eq!(v.field, "items[2].blocked_by", "{v:?}");
    assert!(v.message.contains("→"), "{v:?}");

    assert!(all_items(&f).await.is_empty(), "a refused import left items behind");
    assert_eq!(f.store.events_after(&f.ws, 0, 1000).await.unwrap().len(), events_before, "events stayed");
}

async fn futures_join<T: Send + 'static>(handles: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for h in handles.collect::<Vec<_>>() {
        out.push(h.await.unwrap());
    }
    out
}
