//! The floor (SQLite only): the `cycle` scenario's HTTP load, claim +
//! release on distinct items at 1 and C clients, pointed at the minimal
//! server of [`crate::floor`] instead of pad. Each row puts pad's `http`
//! cycle rate of the same run beside it: pad/floor is how close pad's
//! lease path gets to what one SQLite connection behind HTTP can do.

use std::time::Instant;

use pad_client::Client;

use super::cycle::http_cycle;
use crate::fixture::{Backend, Fixture, task_ref};
use crate::floor::Floor;
use crate::{Deadline, Result, Row, Samples, Sizes, workers};

/// `pad_rows` are the rows measured so far in this run, to find pad's
/// `claim+release` `http` rows at the same client counts.
pub async fn run(fx: &Fixture, s: &Sizes, pad_rows: &[Row]) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let mut client_counts = vec![1, s.clients];
    client_counts.dedup();
    for c in client_counts {
        let floor = Floor::start(c as i64).await?;
        // The floor ignores the token; the client needs one to build requests.
        let client = Client::new(floor.url.clone(), "floor")?;
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
