//! The write-ahead log stays bounded while reads and writes run together
//! (docs/operations.md, "The WAL stays bounded"). The writer never
//! checkpoints inside a commit; the checkpointer keeps the log short, and
//! the writer itself empties a log past the hard bound before it grows
//! further. So the bound is asserted after every write, with readers busy
//! throughout, and holds however loaded the machine is: nothing here waits
//! for a background thread to have run.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use pad_core::{ItemFilter, NewItem};
use pad_sqlite::{SqliteStore, WAL_HARD_BYTES};
use pad_store::{Actor, Store};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_stays_bounded_while_reads_and_writes_run_together() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pad.db");
    let wal = dir.path().join("pad.db-wal");
    let store = Arc::new(SqliteStore::open(&path).await.unwrap());
    let owner = Actor { user_id: store.ensure_user("o@example.com").await.unwrap().id };
    let ws = store.create_workspace("w", "W", owner).await.unwrap();
    // Readers that keep snapshots open across the writes, as a busy server's do.
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (store, ws, stop, reads) = (Arc::clone(&store), ws.clone(), Arc::clone(&stop), Arc::clone(&reads));
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    store.list_items(&ws, &ItemFilter::default(), 50, None).await.unwrap();
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // About 60 MB of item bodies and their history: four times the bound.
    let body = "x".repeat(50_000);
    let bound = WAL_HARD_BYTES + 1024 * 1024;
    let mut largest = 0;
    for n in 0..600 {
        let new = NewItem { title: format!("item {n}"), body: body.clone(), ..Default::default() };
        store.create_item(&ws, owner, &new).await.unwrap();
        let size = std::fs::metadata(&wal).map_or(0, |m| m.len());
        largest = largest.max(size);
        assert!(size <= bound, "after write {n} the WAL is {size} bytes; the bound is {bound}");
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.await.unwrap();
    }
    let db = std::fs::metadata(&path).unwrap().len();
    assert!(db > 25_000_000, "the writes reached the database file ({db} bytes)");
    assert!(reads.load(Ordering::Relaxed) > 0, "reads ran beside the writes");
    eprintln!("largest WAL {largest} bytes beside a {db}-byte database");
}
