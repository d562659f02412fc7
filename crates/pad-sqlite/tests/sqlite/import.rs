//! An import holds SQLite's only writer while it runs, so what it may do is
//! bounded (docs/api.md, "Import"): its links are checked for cycles in
//! memory, each walk linear in what it reaches.

use std::time::{Duration, Instant};

use pad_core::api::{ImportItem, ImportRequest};
use pad_core::{ItemRef, NewItem, Status};
use pad_sqlite::SqliteStore;
use pad_store::{Actor, Deadline, Store, StoreError};

/// `n` tasks `D-1`…, each blocked by the (up to) `width` before it.
fn dense(key: &str, n: usize, width: usize) -> ImportRequest {
    let items = (1..=n)
        .map(|i| ImportItem {
            file_ref: format!("D-{i}"),
            item: NewItem { title: format!("dense {i}"), ..Default::default() },
            status: Status::Open,
            parent: None,
            blocked_by: (i.saturating_sub(width).max(1)..i).map(|b| format!("D-{b}")).collect(),
            comments: vec![],
            deleted: false,
        })
        .collect();
    ImportRequest { import_key: key.into(), kinds: vec![], items }
}

/// 2000 items each blocked by the 9 before them used to hold the writer for
/// 22.7 s in a release build (a store walk per item, each quadratic in what
/// it reached), every other workspace's writes waiting: far past the 30 s
/// request deadline in a test build, so the import failed. Now it fits, with
/// its links intact (the time is printed, not bounded more tightly), and a
/// cycle closed at the end of such a file is still found.
#[tokio::test]
async fn a_densely_linked_import_fits_the_request_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("pad.db")).await.unwrap();
    let owner = Actor { user_id: store.ensure_user("owner@example.com").await.unwrap().id };
    let ws = store.create_workspace("acme", "Acme", owner).await.unwrap();

    let started = Instant::now();
    let deadline = Deadline::after(Duration::from_secs(30));
    let done = store.import(&ws, owner, &dense("dense", 2000, 9), &deadline).await.unwrap();
    println!("2000 items each blocked by the 9 before imported in {:?}", started.elapsed());
    assert_eq!(done.imported, 2000);
    let last: ItemRef = done.refs[1999].to.parse().unwrap();
    let want: Vec<ItemRef> = done.refs[1990..1999].iter().map(|r| r.to.parse().unwrap()).collect();
    assert_eq!(store.get_item(&ws, &last).await.unwrap().blocked_by, want);

    let mut cyclic = dense("cyclic", 2000, 9);
    cyclic.items[0].blocked_by = vec!["D-2000".into()];
    let deadline = Deadline::after(Duration::from_secs(30));
    let err = store.import(&ws, owner, &cyclic, &deadline).await.unwrap_err();
    let StoreError::Validation(v) = &err else { panic!("{err:?}") };
    // D-1 waits on D-2000, which has no blockers until it is linked last:
    // that closes the cycle, through the whole chain.
    assert_eq!(v.field, "items[1999].blocked_by");
    assert!(v.message.starts_with("would create a cycle: "), "{}", &v.message[..200]);
}
