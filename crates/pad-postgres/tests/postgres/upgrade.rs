//! A store from before workspaces recorded the account their creation was
//! charged to (migration 0016) opens with each charged to its first-added
//! member, the account pad counted its webhook deliveries against until
//! then (docs/webhooks.md, "Isolation"): the creator while it is still a
//! member, else the member added after it; ties by the lower user id. A
//! workspace without members is charged to no one, an account of its own.
//! As SQLite's `upgrade.rs`.

use crate::common;

use std::path::Path;

use pad_postgres::PgStore;
use sqlx::{Connection, Executor};

const MIGRATIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");

#[tokio::test]
async fn workspaces_from_before_are_charged_to_their_first_added_member() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!(
            "SKIPPED workspaces_from_before_are_charged_to_their_first_added_member: {} is not set",
            common::ENV
        );
    };
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    // The schema of the release before: every migration up to 0015.
    sqlx::migrate::Migrator::new(Path::new(MIGRATIONS)).await.unwrap().run_to(15, &mut conn).await.unwrap();
    for sql in [
        "INSERT INTO users (id, email, created_at) OVERRIDING SYSTEM VALUE VALUES
             (1, 'a@example.com', now()), (2, 'b@example.com', now()), (3, 'c@example.com', now())",
        "INSERT INTO workspaces (id, slug, name, created_at) OVERRIDING SYSTEM VALUE VALUES
             (1, 'kept', 'K', now()), (2, 'left', 'L', now()), (3, 'tie', 'T', now()), (4, 'empty', 'E', now())",
        // kept: its creator (1) and a member added later; left: the creator
        // left, the member it added remains; tie: two added at once.
        "INSERT INTO members (workspace_id, user_id, role, added_at) VALUES
             (1, 2, 'owner', '2026-01-01T00:00:05Z'), (1, 1, 'owner', '2026-01-01T00:00:00Z'),
             (2, 2, 'owner', '2026-01-01T00:00:03Z'),
             (3, 3, 'owner', '2026-01-01T00:00:00Z'), (3, 2, 'owner', '2026-01-01T00:00:00Z')",
    ] {
        conn.execute(sql).await.unwrap();
    }
    conn.close().await.unwrap();

    let store = PgStore::open_with(&db.url, 2).await.expect("the old store opens and upgrades");
    drop(store);
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let charged: Vec<(String, Option<i64>)> =
        sqlx::query_as("SELECT slug, charged_to FROM workspaces ORDER BY id").fetch_all(&mut conn).await.unwrap();
    let expected = [("kept", Some(1)), ("left", Some(2)), ("tie", Some(2)), ("empty", None)];
    assert_eq!(charged, expected.map(|(s, c)| (s.to_string(), c)));
}
