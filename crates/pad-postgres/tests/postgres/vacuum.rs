//! Long drains and VACUUM (docs/operations.md): the entries drained items
//! leave at the front of the frontier's index, and delivered webhooks at the
//! head of their subscription's queue, are cleared as the work goes, so
//! claim-next's walk and the look for a queue's oldest delivery stay as
//! short at the 10 000th item as at the first.

use std::time::Duration;

use pad_core::FrontierFilter;
use pad_core::lease::LeaseHandle;
use pad_store::Store;
use sqlx::{Connection, Row};

use crate::common::{self, ENV, ScratchDb, done, setup};

/// Items drained before the look: their old entries are what a walk from the
/// front of the index would step over.
const DRAINED: i64 = 5000;

/// The pages (index and table) `query`, given `id`, reads to find its first
/// row through `index`.
async fn pages_read(conn: &mut sqlx::PgConnection, query: &str, id: i64, index: &str) -> i64 {
    let explain = format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {query}");
    let plan: serde_json::Value =
        sqlx::query(sqlx::AssertSqlSafe(explain)).bind(id).fetch_one(conn).await.unwrap().get(0);
    let root = &plan[0]["Plan"];
    assert!(root.to_string().contains(index), "read through {index}: {root}");
    root["Shared Hit Blocks"].as_i64().unwrap() + root["Shared Read Blocks"].as_i64().unwrap()
}

/// The pages the frontier's first ready item in workspace `ws` costs to find.
async fn frontier_walk(conn: &mut sqlx::PgConnection, ws: i64) -> i64 {
    let first = "SELECT id FROM items WHERE workspace_id = $1 AND deleted_at IS NULL AND status = 'open'
                 ORDER BY priority DESC, created_at, id LIMIT 1";
    pages_read(conn, first, ws, "items_frontier").await
}

/// The pages the oldest delivery queued for subscription `hook` costs to find.
async fn queue_head_walk(conn: &mut sqlx::PgConnection, hook: i64) -> i64 {
    let oldest = "SELECT id FROM webhook_outbox WHERE webhook_id = $1 ORDER BY event_id LIMIT 1";
    pages_read(conn, oldest, hook, "webhook_outbox_webhook_id_event_id_key").await
}

#[tokio::test]
async fn a_drain_clears_the_entries_it_leaves_at_the_front_of_the_frontier() {
    let Some(db) = ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED a_drain_clears_the_entries_it_leaves_at_the_front_of_the_frontier: {ENV} is not set"
        );
    };
    let (store, owner, ws, _) = setup(&db, 0).await;
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    // Only pad's vacuum runs: autovacuum could otherwise clear the entries
    // first on a slow machine, and the test would prove nothing.
    for table in ["items", "webhook_outbox"] {
        let off = format!("ALTER TABLE {table} SET (autovacuum_enabled = false)");
        sqlx::raw_sql(sqlx::AssertSqlSafe(off)).execute(&mut conn).await.unwrap();
    }
    // A backlog seeded in one statement (creating it call by call would take
    // minutes), then drained as a drain leaves items: claimed, then done,
    // two row versions each, in frontier order.
    sqlx::query(
        "INSERT INTO items (workspace_id, prefix, number, kind, title, body, status, priority, created_by,
                            created_at, updated_at)
         SELECT $1, 'TASK', x, 'task', 'item ' || x, '', 'open', 1, $2, now() + x * interval '1 microsecond', now()
         FROM generate_series(1, $3::bigint + 100) AS x",
    )
    .bind(ws.id)
    .bind(owner.user_id)
    .bind(DRAINED)
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query("UPDATE kinds SET next_number = $2::bigint + 101 WHERE workspace_id = $1 AND prefix = 'TASK'")
        .bind(ws.id)
        .bind(DRAINED)
        .execute(&mut conn)
        .await
        .unwrap();
    for status in ["open", "done"] {
        sqlx::query(
            "UPDATE items SET status = $3, updated_at = now() WHERE workspace_id = $1 AND number <= $2::bigint",
        )
        .bind(ws.id)
        .bind(DRAINED)
        .bind(status)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    // A subscription whose receiver took 10 000 deliveries: queued, then
    // deleted as each was delivered, all but the last few.
    let hook: i64 = sqlx::query_scalar(
        "INSERT INTO webhooks (workspace_id, url, secret, created_at) VALUES ($1, 'http://127.0.0.1:9/', 's', now())
         RETURNING id",
    )
    .bind(ws.id)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO events (id, workspace_id, type, item_ref, actor_id, at, data)
             SELECT x, {ws}, 'item.updated', 'TASK-1', {owner}, now(), '{{}}' FROM generate_series(1, 10010) AS x;
         INSERT INTO webhook_outbox (webhook_id, event_id, next_attempt_at)
             SELECT {hook}, x, now() + interval '1 hour' FROM generate_series(1, 10010) AS x;
         DELETE FROM webhook_outbox WHERE webhook_id = {hook} AND event_id <= 10000;",
        ws = ws.id,
        owner = owner.user_id,
    )))
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query("ANALYZE items").execute(&mut conn).await.unwrap();
    // Before any vacuum the walk steps over the 10 000 dead entries: without
    // them (an update that left no entry behind) the test would prove nothing.
    let before = frontier_walk(&mut conn, ws.id).await;
    assert!(before >= 30, "the walk over the drained items read only {before} pages");
    let before = queue_head_walk(&mut conn, hook).await;
    assert!(before >= 30, "the look past the delivered rows read only {before} pages");

    // The drain goes on through the store: 10 items, 20 lease calls, and the
    // 20th starts a vacuum.
    store.set_vacuum_every(20);
    for _ in 0..10 {
        let (item, granted) = store
            .claim_next(&ws, &FrontierFilter::default(), &common::claim(owner, "drainer", false))
            .await
            .unwrap()
            .expect("a ready item");
        assert!(item.item_ref.number > DRAINED, "drained items stay drained: {}", item.item_ref);
        let mut req = done(owner, "drainer", granted.lease.epoch);
        req.handle = LeaseHandle { epoch: Some(granted.lease.epoch), lease_id: Some(granted.lease.lease_id) };
        store.complete(&ws, &item.item_ref, &req).await.unwrap();
    }
    let failed = tokio::time::timeout(Duration::from_secs(120), store.vacuums_finished(1))
        .await
        .expect("the 20th lease call started a vacuum, and it ended");
    assert_eq!(failed, 0, "the vacuum failed (see its warning)");

    // A vacuumed index finds the first ready item in a few pages.
    let walk = frontier_walk(&mut conn, ws.id).await;
    assert!(walk <= 10, "the walk to the first ready item read {walk} pages");
    let walk = queue_head_walk(&mut conn, hook).await;
    assert!(walk <= 10, "the look for the oldest queued delivery read {walk} pages");
}
