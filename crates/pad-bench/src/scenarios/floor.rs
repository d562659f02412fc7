//! The floor: what pad's work costs with nothing around it, beside pad's
//! figure of the same run.
//!
//! - SQLite: the `cycle` scenario's HTTP load, claim + release on distinct
//!   items at 1 and C clients, pointed at the minimal server of
//!   [`crate::floor`] instead of pad. Each row puts pad's `http` cycle rate
//!   beside it: pad/floor is how close pad's lease path gets to what one
//!   SQLite connection behind HTTP can do.
//! - PostgreSQL: the drain's backlog emptied by W workers with the least
//!   SQL that writes what the contract asks of each item
//!   ([`crate::drain_floor`]), beside pad's `drain` row (run it with the
//!   drain scenario) and, in a `--peers` run, the peer queues' rows.

use std::collections::HashSet;
use std::time::Instant;

use pad_client::Client;

use super::cycle::http_cycle;
use super::drain;
use crate::cpu::Cpu;
use crate::drain_floor;
use crate::fixture::{Backend, Db, Fixture, task_ref};
use crate::floor::Floor;
use crate::http_floor;
use crate::{Deadline, Result, Row, Samples, Sizes, workers};

/// `pad_rows` are the rows measured so far in this run, to put pad's figure
/// beside the floor's.
pub async fn run(fx: &Fixture, s: &Sizes, pad_rows: &[Row]) -> Result<Vec<Row>> {
    match &fx.db {
        Db::Sqlite(_) => http(fx, s, pad_rows).await,
        Db::Postgres(pool) => drain(fx, pool, s, pad_rows).await,
    }
}

/// SQLite: pad's HTTP claim + release cycle against the minimal server.
async fn http(fx: &Fixture, s: &Sizes, pad_rows: &[Row]) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let mut client_counts = vec![1, s.clients];
    client_counts.dedup();
    for c in client_counts {
        let floor = Floor::start(c as i64).await?;
        // The floor ignores the token; the client needs one to build requests.
        let client = Client::new(floor.url().clone(), "floor")?;
        let deadline = Deadline::after(s.duration());
        let started = Instant::now();
        let per_worker = workers(c, |w| {
            let client = client.clone();
            async move {
                let number = 1 + w as i64;
                let (r, holder) = (task_ref(number), format!("cycler-{number}"));
                let mut samples = Samples::default();
                while !deadline.passed() {
                    let t = Instant::now();
                    http_cycle(&client, "floor", &r, &holder).await?;
                    samples.record(t.elapsed());
                }
                Ok(samples)
            }
        })
        .await;
        let elapsed = started.elapsed();
        floor.finish().await;
        let samples = Samples::merge(per_worker?);
        let params = format!("clients={c}");
        let row = Row::new(fx.backend, "claim+release", params.clone(), "floor").measured(
            samples.len() as u64,
            elapsed,
            samples,
        );
        let pad = pad_rows.iter().find(|r| {
            r.backend == Backend::Sqlite && r.scenario == "claim+release" && r.via == "http" && r.params == params
        });
        let note = match pad {
            Some(pad) if row.ops_per_sec > 0.0 => {
                let p99 = |r: &Row| r.latency.map_or("-".into(), |l| format!("{:.2} ms", l.p99_ms));
                format!(
                    "cycles/s; one rusqlite connection behind a mutex, no auth, no events; pad http/floor = {:.2}, p99 pad {} vs floor {}",
                    pad.ops_per_sec / row.ops_per_sec,
                    p99(pad),
                    p99(&row)
                )
            }
            _ => "cycles/s; one rusqlite connection behind a mutex, no auth, no events; run with the cycle scenario for pad's ratio".into(),
        };
        rows.push(row.note(note));
    }
    Ok(rows)
}

/// PostgreSQL: the drain's backlog at each worker count, with the least SQL.
async fn drain(fx: &Fixture, pool: &sqlx::PgPool, s: &Sizes, pad_rows: &[Row]) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &w in &s.drain_workers {
        drain_floor::prepare(pool, s.drain_items).await?;
        let floor = drain_floor::connect(pool, w).await?;
        let cpu = Cpu::now();
        let started = Instant::now();
        let per_worker = workers(w, |i| drain_floor::drain(floor.clone(), format!("floor-{i}"))).await;
        let elapsed = started.elapsed();
        let cpu = Cpu::now().per_item_total_since(cpu, s.drain_items);
        floor.close().await;
        let ids: Vec<i64> = per_worker?.into_iter().flatten().collect();
        let distinct = ids.iter().collect::<HashSet<_>>().len();
        let written = drain_floor::written(pool).await?;
        drain_floor::finish(pool).await?;
        let n = s.drain_items as i64;
        if ids.len() as i64 != n || distinct != ids.len() || written != (3 * n, n, n) {
            return Err(format!(
                "the drain floor with {w} workers handed out {} items ({distinct} distinct) of {n}, wrote {written:?}",
                ids.len()
            )
            .into());
        }
        let params = format!("workers={w} items={}", s.drain_items);
        let row =
            Row::new(fx.backend, "drain", params, "floor").measured(ids.len() as u64, elapsed, Samples::default());
        let pad = pad_drain_over(pad_rows, &row, "floor");
        rows.push(row.note(format!(
            "items/s; the contract's writes per item in 2 autocommitted statements from this process, no HTTP, \
             no event order, no wake-ups; {pad}; {cpu}"
        )));
        rows.push(http_drain(fx, pool, s, w, pad_rows).await?);
    }
    Ok(rows)
}

/// PostgreSQL: the same backlog drained by pad's drain load through the
/// floor's statements behind a minimal HTTP server ([`crate::http_floor`]).
async fn http_drain(fx: &Fixture, pool: &sqlx::PgPool, s: &Sizes, w: usize, pad_rows: &[Row]) -> Result<Row> {
    drain_floor::prepare(pool, s.drain_items).await?;
    let floor_pool = drain_floor::connect(pool, w).await?;
    // On this runtime, as pad's server is: its CPU counts as the server's.
    let server = http_floor::start(floor_pool.clone()).await?;
    let client = Client::new(server.url.clone(), "floor")?;
    let cpu = Cpu::now();
    let started = Instant::now();
    let per_worker = workers(w, |i| drain::worker(client.clone(), "floor".into(), format!("floor-{i}"), started)).await;
    let elapsed = started.elapsed();
    let cpu = Cpu::now().per_item_since(cpu, s.drain_items);
    server.finish().await;
    floor_pool.close().await;
    let per_worker = per_worker?;
    let written = drain_floor::written(pool).await?;
    drain_floor::finish(pool).await?;
    let refs: Vec<&String> = per_worker.iter().flat_map(|p| p.1.iter()).collect();
    let distinct = refs.iter().collect::<HashSet<_>>().len();
    let n = s.drain_items as i64;
    if refs.len() as i64 != n || distinct != refs.len() || written != (3 * n, n, n) {
        return Err(format!(
            "the HTTP drain floor with {w} workers handed out {} items ({distinct} distinct) of {n}, wrote {written:?}",
            refs.len()
        )
        .into());
    }
    let mut done_at: Vec<_> = per_worker.iter().flat_map(|p| p.3.iter().copied()).collect();
    done_at.sort();
    let samples = Samples::merge(per_worker.into_iter().map(|p| p.0));
    let params = format!("workers={w} items={}", s.drain_items);
    let row = Row::new(fx.backend, "drain", params, "http-floor").measured(n as u64, elapsed, samples);
    let pad = pad_drain_over(pad_rows, &row, "http floor");
    Ok(row.note(format!(
        "items/s; pad's drain load against the floor's 2 statements behind a minimal HTTP server (a complete \
         carrying the next claim per request, a connection per worker, no auth, no event order, no wake-ups); \
         {}; {pad}; {cpu}",
        drain::tenths(&done_at)
    )))
}

/// `pad drain/<floor> = R`: pad's drain row of this run with `row`'s
/// parameters over `row`, or how to get one.
fn pad_drain_over(pad_rows: &[Row], row: &Row, floor: &str) -> String {
    pad_rows
        .iter()
        .find(|r| r.backend == Backend::Postgres && r.scenario == "drain" && r.via == "http" && r.params == row.params)
        .filter(|_| row.ops_per_sec > 0.0)
        .map_or("run with the drain scenario for pad's ratio".into(), |p| {
            format!("pad drain/{floor} = {:.2}", p.ops_per_sec / row.ops_per_sec)
        })
}
