//! The event horizon counts only this database's transactions (docs/api.md,
//! "Event order on PostgreSQL"): another database's, even one that ends
//! while a read is running, never hides an event already committed here.

use crate::common::{self, setup};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use pad_core::NewItem;
use pad_store::Store;
use sqlx::Connection;

/// Writers in another database keep short transactions overlapping, each
/// holding a transaction id for a moment, so that one of them is running
/// when a read here takes its snapshot and ends while the read runs. Every
/// read right after a committed write must include it. The owners of
/// running transactions used to be read in the same statement as the
/// snapshot, i.e. after it: such a transaction was then unknown, counted,
/// and held the horizon below the write (a few reads in a hundred).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_databases_transactions_never_hide_committed_events() {
    let (Some(db), Some(other)) = (common::ScratchDb::create().await, common::ScratchDb::create().await) else {
        return eprintln!(
            "SKIPPED another_databases_transactions_never_hide_committed_events: {} is not set",
            common::ENV
        );
    };
    let (store, owner, ws, _) = setup(&db, 0).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for _ in 0..4 {
        let (url, stop) = (other.url.clone(), Arc::clone(&stop));
        writers.push(tokio::spawn(async move {
            let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
            let mut ended = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut tx = conn.begin().await.unwrap();
                sqlx::query("SELECT pg_current_xact_id()").execute(&mut *tx).await.unwrap();
                sqlx::query("SELECT pg_sleep(0.002)").execute(&mut *tx).await.unwrap();
                tx.commit().await.unwrap();
                ended += 1;
            }
            ended
        }));
    }

    let mut hidden = Vec::new();
    for i in 0..400 {
        let new = NewItem { title: format!("item {i}"), ..Default::default() };
        let item = store.create_item(&ws, owner, &new).await.unwrap();
        let events = store.events_after(&ws, 0, 1000).await.unwrap();
        if events.last().and_then(|e| e.item_ref.as_deref()) != Some(item.item_ref.to_string().as_str()) {
            hidden.push(i);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut ended = 0;
    for w in writers {
        ended += w.await.unwrap();
    }
    assert!(ended > 0, "the other database's writers ran");
    assert!(hidden.is_empty(), "reads right after these writes missed them: {hidden:?} (of 400)");
}
