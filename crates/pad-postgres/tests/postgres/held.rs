//! A complete alone between its read and its write (docs/leases.md, "One
//! call, one statement"): each test holds the item's row lock in a
//! transaction of its own, lets the complete's one statement read the row
//! and wait for the lock, changes the row and commits.

use std::sync::Arc;
use std::time::Duration;

use pad_core::{ItemRef, Status, Workspace};
use pad_postgres::{GroupStats, PgStore};
use pad_store::{Store, StoreError};

use crate::common::{self, done, last_event, setup};

/// A complete alone whose one statement has read the item and waits for
/// the row's lock, which `lock`, a transaction of the test's own, holds:
/// the test changes the row there and commits, as a concurrent writer
/// would between the statement's read and its write.
struct HeldComplete {
    store: Arc<PgStore>,
    ws: Workspace,
    r: ItemRef,
    before: GroupStats,
    lock: sqlx::PgConnection,
    answer: tokio::task::JoinHandle<Result<pad_core::Item, StoreError>>,
}

/// One item claimed by `holder`, its row locked by the test, and its
/// complete started: it returns once PostgreSQL shows the complete's
/// statement waiting for that lock (a signal from the database, not a
/// sleep), so the statement has read the row as it was.
async fn held_complete(db: &common::ScratchDb, holder: &str) -> (HeldComplete, pad_store::Actor) {
    use sqlx::Connection;
    let (store, owner, ws, refs) = setup(db, 1).await;
    let r = refs[0].clone();
    let epoch = store.claim(&ws, &r, &common::claim(owner, holder, false)).await.unwrap().lease.epoch;
    let before = store.group_stats();
    let mut lock = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut lock).await.unwrap();
    sqlx::query("SELECT 1 FROM items WHERE workspace_id = $1 AND prefix = $2 AND number = $3 FOR UPDATE")
        .bind(ws.id)
        .bind(r.prefix.as_str())
        .bind(r.number)
        .fetch_one(&mut lock)
        .await
        .unwrap();
    let answer = {
        let (store, ws, r, req) = (Arc::clone(&store), ws.clone(), r.clone(), done(owner, holder, epoch));
        tokio::spawn(async move { store.complete(&ws, &r, &req).await })
    };
    let mut watch = sqlx::PgConnection::connect(&db.url).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'WITH cur%'",
            )
            .fetch_one(&mut watch)
            .await
            .unwrap();
            if waiting > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the complete's statement never waited for the row");
    (HeldComplete { store, ws, r, before, lock, answer }, owner)
}

/// Changes the held row with `sql` ($1 its id), then commits, which lets
/// the complete's statement take the lock and find the row changed; the
/// rows `sql` returned.
async fn change_and_commit(held: &mut HeldComplete, sql: &str) -> Vec<sqlx::postgres::PgRow> {
    let id: i64 = sqlx::query_scalar("SELECT id FROM items WHERE workspace_id = $1 AND prefix = $2 AND number = $3")
        .bind(held.ws.id)
        .bind(held.r.prefix.as_str())
        .bind(held.r.number)
        .fetch_one(&mut held.lock)
        .await
        .unwrap();
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql.to_string())).bind(id).fetch_all(&mut held.lock).await.unwrap();
    sqlx::query("COMMIT").execute(&mut held.lock).await.unwrap();
    rows
}

/// The lease a complete alone read is granted to another worker before the
/// complete writes: its statement finds the row changed and writes nothing,
/// and the complete, made again under the row lock, is refused
/// `lease_lost`. The new holder keeps the item, and the refused complete
/// wrote no event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_alone_whose_lease_ended_after_its_read_writes_nothing() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED a_complete_alone_whose_lease_ended_after_its_read_writes_nothing: {} is not set",
            common::ENV
        );
    };
    let (mut held, _) = held_complete(&db, "w1").await;
    let after_event = last_event(&held.store, &held.ws).await;
    change_and_commit(
        &mut held,
        "UPDATE items SET lease_holder = 'w2', lease_epoch = lease_epoch + 1, lease_id = nextval('lease_ids'),
            lease_acquired_at = clock_timestamp(), lease_renewed_at = clock_timestamp(),
            lease_expires_at = clock_timestamp() + interval '10 minutes'
         WHERE id = $1",
    )
    .await;
    let HeldComplete { store, ws, r, before, answer, .. } = held;

    let answer = answer.await.unwrap();
    let Err(StoreError::LeaseLost { .. }) = &answer else {
        panic!("the complete must be refused: {answer:?}");
    };
    let item = store.get_item(&ws, &r).await.unwrap();
    assert_eq!(item.status, Status::Open);
    assert_eq!(item.lease.expect("w2 holds it").holder, "w2");
    assert!(store.events_after(&ws, after_event, 1000).await.unwrap().is_empty(), "no event of the complete");
    let stats = store.group_stats();
    assert_eq!(stats, GroupStats { to_transaction: before.to_transaction + 1, ..before });
}

/// The item a complete alone read is edited before the complete writes (its
/// status, a new version): the statement finds the version changed and
/// writes nothing, and the complete, made again under the row lock,
/// succeeds and records the status change from the edited status, not the
/// one it read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_alone_whose_item_changed_after_its_read_is_made_again() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED a_complete_alone_whose_item_changed_after_its_read_is_made_again: {} is not set",
            common::ENV
        );
    };
    let (mut held, owner) = held_complete(&db, "w").await;
    let edit = format!(
        "WITH e AS (UPDATE items SET status = 'in-progress', version = version + 1, updated_at = clock_timestamp()
                    WHERE id = $1 RETURNING id, version, updated_at)
         INSERT INTO item_versions (item_id, version, actor_id, at, changes)
         SELECT id, version, {}, updated_at, '{{\"status\": {{\"from\": \"open\", \"to\": \"in-progress\"}}}}' FROM e",
        owner.user_id
    );
    change_and_commit(&mut held, &edit).await;
    let HeldComplete { store, ws, r, before, answer, .. } = held;

    let item = answer.await.unwrap().unwrap();
    assert_eq!(item.status, Status::Done);
    let versions = store.history(&ws, &r).await.unwrap();
    let seen: Vec<_> = versions.iter().map(|v| (v.version, v.changes["status"].clone())).collect();
    let change = |from: &str, to: &str| serde_json::json!({ "from": from, "to": to });
    assert_eq!(seen[..2], [(3, change("in-progress", "done")), (2, change("open", "in-progress"))], "{versions:?}");
    let stats = store.group_stats();
    assert_eq!(stats, GroupStats { to_transaction: before.to_transaction + 1, ..before });
}

/// A renew between a complete's read and its write: the statement, which
/// would record the end at the read's time, before the renewal its holder
/// was told of, writes nothing, and the complete is made again under the
/// row lock, ending the lease after the renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renew_between_a_complete_alones_read_and_write_sends_it_to_a_transaction() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED a_renew_between_a_complete_alones_read_and_write_sends_it_to_a_transaction: {} is not set",
            common::ENV
        );
    };
    let (mut held, _) = held_complete(&db, "w").await;
    let renewed = change_and_commit(
        &mut held,
        "UPDATE items SET lease_renewed_at = clock_timestamp(),
            lease_expires_at = clock_timestamp() + interval '10 minutes' WHERE id = $1 RETURNING lease_renewed_at",
    )
    .await;
    let renewed_at: pad_core::Timestamp = sqlx::Row::get(&renewed[0], "lease_renewed_at");
    let HeldComplete { store, before, answer, .. } = held;

    let item = answer.await.unwrap().unwrap();
    assert_eq!(item.status, Status::Done);
    let ended = item.last_lease.expect("the lease ended").ended_at;
    assert!(ended >= renewed_at, "ended {ended} before the renewal at {renewed_at}");
    let stats = store.group_stats();
    assert_eq!(stats, GroupStats { to_transaction: before.to_transaction + 1, ..before });
}
