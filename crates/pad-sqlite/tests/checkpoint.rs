//! The write-ahead log stays bounded without checkpoints on the write path
//! (docs/operations.md, "SQLite writes: group commit"): the writer never
//! checkpoints, so only the checkpointer keeps the WAL from growing with
//! every write.

use std::time::{Duration, Instant};

use pad_core::NewItem;
use pad_sqlite::SqliteStore;
use pad_store::{Actor, Store};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_is_checkpointed_beside_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pad.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let owner = Actor { user_id: store.ensure_user("o@example.com").await.unwrap().id };
    let ws = store.create_workspace("w", "W", owner).await.unwrap();
    // About 30 MB of item bodies (plus their history), written over a few seconds.
    let body = "x".repeat(50_000);
    for n in 0..600 {
        let new = NewItem { title: format!("item {n}"), body: body.clone(), ..Default::default() };
        store.create_item(&ws, owner, &new).await.unwrap();
        if n % 100 == 0 {
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }
    let wal = dir.path().join("pad.db-wal");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut size = std::fs::metadata(&wal).unwrap().len();
    // A log that restarts after each checkpoint holds what was written
    // between two checkpoints, a small part of all that was written.
    let db = || std::fs::metadata(&path).unwrap().len();
    while size * 3 > db() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        size = std::fs::metadata(&wal).unwrap().len();
    }
    let db = db();
    assert!(db > 25_000_000, "the writes reached the database file ({db} bytes)");
    assert!(size * 3 <= db, "the WAL grew to {size} bytes beside a {db}-byte database: nothing checkpoints it");
}
