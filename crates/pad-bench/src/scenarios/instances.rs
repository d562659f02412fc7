//! More instances (Postgres only): the `cycle` scenario's HTTP load at C
//! clients, first through the fixture's one server, then spread round-robin
//! over three servers with a store and connection pool each, on the same
//! database, as three `pad serve` processes would be. They share this
//! process's cores with the load generator, so the figure shows what the
//! database lets through, not what three machines would. The note gives the
//! CPU per cycle of the servers together, of the load and of PostgreSQL.

use std::time::Instant;

use pad_client::Client;

use super::cycle::http_cycle;
use crate::cpu::Cpu;
use crate::fixture::{Fixture, task_ref};
use crate::{Deadline, Result, Row, Samples, Sizes, workers};

pub async fn run(fx: &Fixture, s: &Sizes) -> Result<Vec<Row>> {
    let c = s.clients;
    let mut rows: Vec<Row> = Vec::new();
    for n in [1usize, 3] {
        let mut extra = Vec::new();
        for _ in 1..n {
            extra.push(fx.instance().await?);
        }
        let clients: Vec<Client> =
            std::iter::once(fx.fresh_client()?).chain(extra.iter().map(|i| i.client.clone())).collect();
        let ws = fx.workspace(&format!("instances-{n}")).await?;
        let first = fx.seed(&ws, c as u64).await?.start;
        let deadline = Deadline::after(s.duration());
        let cpu = Cpu::now();
        let started = Instant::now();
        let per_worker = workers(c, |w| {
            let (client, slug) = (clients[w % n].clone(), ws.slug.clone());
            async move {
                let number = first + w as i64;
                let (r, holder) = (task_ref(number), format!("cycler-{number}"));
                let mut samples = Samples::default();
                while !deadline.passed() {
                    let t = Instant::now();
                    http_cycle(&client, &slug, &r, &holder).await?;
                    samples.record(t.elapsed());
                }
                Ok(samples)
            }
        })
        .await;
        let elapsed = started.elapsed();
        let after = Cpu::now();
        for i in extra {
            i.finish().await;
        }
        let samples = Samples::merge(per_worker?);
        let row = Row::new(fx.backend, "claim+release", format!("clients={c} instances={n}"), "http").measured(
            samples.len() as u64,
            elapsed,
            samples,
        );
        // Per cycle, `pad serve` being every instance together.
        let cpu = after.per_item_since(cpu, row.ops.max(1));
        let note = match rows.first() {
            Some(one) if one.ops_per_sec > 0.0 => {
                format!("cycles/s; {n} instances / 1 = {:.2}; {cpu}", row.ops_per_sec / one.ops_per_sec)
            }
            _ => format!("cycles/s; {n} instance(s), one database, clients spread round-robin; {cpu}"),
        };
        rows.push(row.note(note));
    }
    Ok(rows)
}
