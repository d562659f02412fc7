//! Claim + release on distinct items (each client owns one, so nothing
//! conflicts), three ways, at 1 and at C clients:
//!
//! - `http`: through the in-process server with the typed client;
//! - `store`: the same two `Store` calls in-process, no HTTP;
//! - `sql`: two plain autocommit `UPDATE`s on the same table, the floor any
//!   implementation on this database pays (the "raw" reference).
//!
//! The headline is the `http` rate over the `store` rate.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use pad_client::Client;
use pad_core::Workspace;

use super::{TTL_SECONDS, claim_body, claim_request, release_body, release_request};
use crate::fixture::{Db, Fixture, task_item_ref, task_ref};
use crate::{Deadline, Result, Row, Samples, Sizes, workers};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Http,
    Store,
    Sql,
}

impl Via {
    fn name(self) -> &'static str {
        match self {
            Via::Http => "http",
            Via::Store => "store",
            Via::Sql => "sql",
        }
    }
}

pub async fn run(fx: &Fixture, s: &Sizes) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let mut client_counts = vec![1, s.clients];
    client_counts.dedup();
    for c in client_counts {
        let mut rates = Vec::new();
        for via in [Via::Http, Via::Store, Via::Sql] {
            let ws = fx.workspace(&format!("cycle-{}-{c}", via.name())).await?;
            let first = fx.seed(&ws, c as u64).await?.start;
            let deadline = Deadline::after(s.duration());
            let started = Instant::now();
            let per_worker = workers(c, |w| cycle(fx, via, ws.clone(), first + w as i64, deadline)).await?;
            let elapsed = started.elapsed();
            let samples = Samples::merge(per_worker);
            let row = Row::new(fx.backend, "claim+release", format!("clients={c}"), via.name()).measured(
                samples.len() as u64,
                elapsed,
                samples,
            );
            rates.push(row.ops_per_sec);
            rows.push(row);
        }
        let n = rows.len();
        let (http, store, sql) = (rates[0], rates[1], rates[2]);
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        rows[n - 3].note =
            format!("cycles/s; http/store = {:.2}, http/sql = {:.2}", ratio(http, store), ratio(http, sql));
        rows[n - 2].note = format!("cycles/s; store/sql = {:.2}", ratio(store, sql));
        rows[n - 1].note = "cycles/s; two autocommit UPDATEs, no event rows".into();
    }
    Ok(rows)
}

/// One client cycling on its own item until the deadline; latency per cycle.
fn cycle(
    fx: &Fixture, via: Via, ws: Workspace, number: i64, deadline: Deadline,
) -> impl Future<Output = Result<Samples>> + Send + 'static {
    let (client, store, db, owner) = (fx.client.clone(), fx.store.clone(), fx.db.clone(), fx.owner);
    async move {
        let r = task_ref(number);
        let item = task_item_ref(number);
        let holder = format!("cycler-{number}");
        let mut samples = Samples::default();
        while !deadline.passed() {
            let started = Instant::now();
            match via {
                Via::Http => http_cycle(&client, &ws.slug, &r, &holder).await?,
                Via::Store => {
                    store.claim(&ws, &item, &claim_request(owner, &holder)).await?;
                    store.release(&ws, &item, &release_request(owner, &holder)).await?;
                }
                Via::Sql => sql_cycle(&db, ws.id, number, owner.user_id, &holder).await?,
            }
            samples.record(started.elapsed());
        }
        Ok(samples)
    }
}

/// The HTTP load generator's step: claim, then release, through the typed
/// client. pad's `http` rows and the floor server's rows
/// (`scenarios::floor`) are both measured with it.
pub async fn http_cycle(client: &Client, slug: &str, r: &str, holder: &str) -> Result<()> {
    client.claim(slug, r, &claim_body(holder)).await?;
    client.release(slug, r, &release_body(holder)).await?;
    Ok(())
}

/// The lease predicate and write of L1 and L6 as bare statements.
async fn sql_cycle(db: &Db, ws: i64, number: i64, user: i64, holder: &str) -> Result<()> {
    let (claimed, released) = match db {
        Db::Sqlite(pool) => {
            let now = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH)?.as_micros())?;
            let claimed = sqlx::query(
                "UPDATE items SET lease_holder = ?1, lease_user_id = ?2, lease_session_id = NULL,
                        lease_epoch = lease_epoch + 1, lease_acquired_at = ?3, lease_renewed_at = ?3,
                        lease_expires_at = ?3 + ?4 * 1000000, lease_ttl_seconds = ?4
                 WHERE workspace_id = ?5 AND prefix = 'TASK' AND number = ?6
                   AND (lease_holder IS NULL OR lease_expires_at <= ?3)",
            )
            .bind(holder)
            .bind(user)
            .bind(now)
            .bind(TTL_SECONDS)
            .bind(ws)
            .bind(number)
            .execute(pool)
            .await?
            .rows_affected();
            let released = sqlx::query(
                "UPDATE items SET lease_holder = NULL, lease_user_id = NULL, lease_acquired_at = NULL,
                        lease_renewed_at = NULL, lease_expires_at = NULL, lease_ttl_seconds = NULL
                 WHERE workspace_id = ?1 AND prefix = 'TASK' AND number = ?2 AND lease_holder = ?3",
            )
            .bind(ws)
            .bind(number)
            .bind(holder)
            .execute(pool)
            .await?
            .rows_affected();
            (claimed, released)
        }
        Db::Postgres(pool) => {
            let claimed = sqlx::query(
                "UPDATE items SET lease_holder = $1, lease_user_id = $2, lease_session_id = NULL,
                        lease_epoch = lease_epoch + 1, lease_acquired_at = now(), lease_renewed_at = now(),
                        lease_expires_at = now() + $3 * interval '1 second', lease_ttl_seconds = $3
                 WHERE workspace_id = $4 AND prefix = 'TASK' AND number = $5
                   AND (lease_holder IS NULL OR lease_expires_at <= now())",
            )
            .bind(holder)
            .bind(user)
            .bind(TTL_SECONDS as i32)
            .bind(ws)
            .bind(number)
            .execute(pool)
            .await?
            .rows_affected();
            let released = sqlx::query(
                "UPDATE items SET lease_holder = NULL, lease_user_id = NULL, lease_acquired_at = NULL,
                        lease_renewed_at = NULL, lease_expires_at = NULL, lease_ttl_seconds = NULL
                 WHERE workspace_id = $1 AND prefix = 'TASK' AND number = $2 AND lease_holder = $3",
            )
            .bind(ws)
            .bind(number)
            .bind(holder)
            .execute(pool)
            .await?
            .rows_affected();
            (claimed, released)
        }
    };
    if (claimed, released) != (1, 1) {
        return Err(format!("raw SQL cycle on TASK-{number}: claimed {claimed}, released {released} rows").into());
    }
    Ok(())
}
