//! A store made by the previous release (every migration but 0007, which
//! came later with a lower number) opens with this one: migration 0007
//! rebuilds the event log without AUTOINCREMENT and keeps every event, its
//! id, and the webhook outbox rows that point at it. A store from before
//! migration 0016 opens with its workspaces charged to their first-added
//! members.

use std::path::Path;

use pad_core::NewItem;
use pad_sqlite::SqliteStore;
use pad_store::{Actor, Store};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{Executor, Row};

const MIGRATIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");

#[tokio::test]
async fn a_store_of_the_previous_release_upgrades_and_keeps_its_events() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old-migrations");
    std::fs::create_dir(&old).unwrap();
    for f in std::fs::read_dir(MIGRATIONS).unwrap() {
        let f = f.unwrap();
        if !f.file_name().to_string_lossy().starts_with("0007") {
            std::fs::copy(f.path(), old.join(f.file_name())).unwrap();
        }
    }
    let db = dir.path().join("pad.db");
    let opts = SqliteConnectOptions::new()
        .filename(&db)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .foreign_keys(true);
    let pool = SqlitePoolOptions::new().max_connections(1).connect_with(opts).await.unwrap();
    sqlx::migrate::Migrator::new(Path::new(&old)).await.unwrap().run(&pool).await.unwrap();
    // The old schema, with events and an outbox row pointing at one.
    for sql in [
        "INSERT INTO users (id, email, created_at) VALUES (1, 'o@example.com', 0)",
        "INSERT INTO workspaces (id, slug, name, created_at) VALUES (1, 'w', 'W', 0)",
        "INSERT INTO members (workspace_id, user_id, role, added_at) VALUES (1, 1, 'owner', 0)",
        "INSERT INTO kinds (workspace_id, name, prefix) VALUES (1, 'task', 'TASK')",
        "INSERT INTO events (id, workspace_id, type, item_ref, actor_id, at, data) VALUES
             (7, 1, 'item.created', 'TASK-1', 1, 1, '{}'), (41, 1, 'item.updated', 'TASK-1', 1, 2, '{\"a\":1}')",
        "INSERT INTO webhooks (id, workspace_id, url, secret, created_at) VALUES (1, 1, 'http://127.0.0.1:9/h', 's', 0)",
        "INSERT INTO webhook_outbox (webhook_id, event_id, next_attempt_at) VALUES (1, 41, 0)",
    ] {
        pool.execute(sql).await.unwrap();
    }
    let autoincrement: String =
        sqlx::query_scalar("SELECT sql FROM sqlite_master WHERE name = 'events'").fetch_one(&pool).await.unwrap();
    assert!(autoincrement.contains("AUTOINCREMENT"), "the old schema is the old one");
    pool.close().await;

    let store = SqliteStore::open(&db).await.expect("the old store opens and upgrades");
    let ws = store.membership(Actor { user_id: 1 }, "w").await.unwrap().0;
    let events = store.events_where(&ws, 0, 100, &Default::default()).await.unwrap();
    assert_eq!(events.iter().map(|e| e.id).collect::<Vec<_>>(), vec![7, 41]);
    assert_eq!(events[1].data, serde_json::json!({"a": 1}));
    // New events follow the old ones.
    store.create_item(&ws, Actor { user_id: 1 }, &NewItem { title: "new".into(), ..Default::default() }).await.unwrap();
    let after = store.events_where(&ws, 41, 100, &Default::default()).await.unwrap();
    assert!(!after.is_empty() && after.iter().all(|e| e.id > 41), "{after:?}");
    store.close().await;

    let pool = SqlitePoolOptions::new()
        .connect_with(SqliteConnectOptions::new().filename(&db).foreign_keys(true))
        .await
        .unwrap();
    let schema: String =
        sqlx::query_scalar("SELECT sql FROM sqlite_master WHERE name = 'events'").fetch_one(&pool).await.unwrap();
    assert!(!schema.contains("AUTOINCREMENT"), "{schema}");
    let outbox = sqlx::query("SELECT event_id FROM webhook_outbox ORDER BY id").fetch_all(&pool).await.unwrap();
    assert_eq!(outbox.first().map(|r| r.get::<i64, _>("event_id")), Some(41), "the outbox row kept its event");
    let dangling = sqlx::query("PRAGMA foreign_key_check").fetch_all(&pool).await.unwrap();
    assert!(dangling.is_empty(), "no reference dangles after the rebuild");
    let index: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE name = 'events_by_workspace'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(index, 1);
}

/// A store from before workspaces recorded the account their creation was
/// charged to (migration 0016) opens with each charged to its first-added
/// member, the account pad counted its webhook deliveries against until then
/// (docs/webhooks.md, "Isolation"): the creator while it is still a member,
/// else the member added after it; ties by the lower user id. A workspace
/// without members is charged to no one, an account of its own.
#[tokio::test]
async fn workspaces_from_before_are_charged_to_their_first_added_member() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pad.db");
    let opts = SqliteConnectOptions::new().filename(&db).create_if_missing(true).foreign_keys(true);
    let pool = SqlitePoolOptions::new().max_connections(1).connect_with(opts).await.unwrap();
    // The schema of the release before: every migration up to 0015.
    sqlx::migrate::Migrator::new(Path::new(MIGRATIONS)).await.unwrap().run_to(15, &pool).await.unwrap();
    for sql in [
        "INSERT INTO users (id, email, created_at) VALUES
             (1, 'a@example.com', 0), (2, 'b@example.com', 0), (3, 'c@example.com', 0)",
        "INSERT INTO workspaces (id, slug, name, created_at) VALUES
             (1, 'kept', 'K', 0), (2, 'left', 'L', 0), (3, 'tie', 'T', 0), (4, 'empty', 'E', 0)",
        // kept: its creator (1) and a member added later; left: the creator
        // left, the member it added remains; tie: two added at once.
        "INSERT INTO members (workspace_id, user_id, role, added_at) VALUES
             (1, 2, 'owner', 5), (1, 1, 'owner', 0), (2, 2, 'owner', 3), (3, 3, 'owner', 0), (3, 2, 'owner', 0)",
    ] {
        pool.execute(sql).await.unwrap();
    }
    pool.close().await;

    let store = SqliteStore::open(&db).await.expect("the old store opens and upgrades");
    store.close().await;
    let pool = SqlitePoolOptions::new().connect_with(SqliteConnectOptions::new().filename(&db)).await.unwrap();
    let charged: Vec<(String, Option<i64>)> =
        sqlx::query_as("SELECT slug, charged_to FROM workspaces ORDER BY id").fetch_all(&pool).await.unwrap();
    let expected = [("kept", Some(1)), ("left", Some(2)), ("tie", Some(2)), ("empty", None)];
    assert_eq!(charged, expected.map(|(s, c)| (s.to_string(), c)));
}
