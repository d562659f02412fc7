//! The plans the lease calls' connections keep (docs/operations.md, "Plans
//! on a new database"): each statement reaches the rows it writes by their
//! keys, whatever the statistics say, so its cost does not grow with the
//! leases other workers hold.

use sqlx::Connection;

use crate::common::{self, ENV, ScratchDb, setup};

/// `items_leased_by_expiry` holds every recorded lease. On statistics taken
/// while few were held, a plan that reads all of its entries looks as cheap
/// as one lookup by key, and the connection keeps that plan: with 5 000
/// leases held by others, a complete alone cost PostgreSQL 3.2 ms instead
/// of 0.45 ms (docs/benchmarks.md, "A complete that read every lease").
#[tokio::test]
async fn no_lease_statement_reads_every_recorded_lease() {
    let Some(db) = ScratchDb::create().await else {
        return eprintln!("SKIPPED no_lease_statement_reads_every_recorded_lease: {ENV} is not set");
    };
    let (store, owner, ws, _) = setup(&db, 0).await;
    // A backlog seeded in one statement, and statistics as a new deployment
    // has them: taken while no lease was held.
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::query(
        "INSERT INTO items (workspace_id, prefix, number, kind, title, body, status, priority, created_by,
                            created_at, updated_at)
         SELECT $1, 'TASK', x, 'task', 'item ' || x, '', 'open', 1, $2, now() + x * interval '1 microsecond', now()
         FROM generate_series(1, 20000) AS x",
    )
    .bind(ws.id)
    .bind(owner.user_id)
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::raw_sql("VACUUM ANALYZE items").execute(&mut conn).await.unwrap();
    let plans = store.lease_plans(&ws, &common::claim(owner, "w", false)).await.unwrap();
    assert_eq!(plans.len(), 12, "every statement the lease connections run: {plans:?}");
    for (name, plan) in &plans {
        assert!(plan.contains("Scan"), "{name}: a plan was read:\n{plan}");
        assert!(!plan.contains("items_leased_by_expiry"), "{name} reads every recorded lease:\n{plan}");
    }
}
