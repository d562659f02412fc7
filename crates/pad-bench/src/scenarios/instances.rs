//! More instances (Postgres only): the `cycle` scenario's HTTP load at C
//! clients, first through the fixture's one server (the default pool and
//! lanes), then spread round-robin over three servers with a store and
//! connection pool each, on the same database, as three `pad serve`
//! processes would be, each sized for a fleet of three as
//! docs/operations.md ("Sizing the PostgreSQL pool") says for a database
//! with this machine's cores. They share this process's cores with the
//! load generator, so the figure shows what the database lets through, not
//! what three machines would. The note gives the CPU per cycle of the
//! servers together, of the load and of PostgreSQL.

use std::time::Instant;

use pad_client::Client;

use super::cycle::http_cycle;
use crate::cpu::Cpu;
use crate::fixture::{Fixture, task_ref};
use crate::{Deadline, Result, Row, Samples, Sizes, workers};

pub async fn run(fx: &Fixture, s: &Sizes) -> Result<Vec<Row>> {
    let c = s.clients;
    let mut rows: Vec<Row> = Vec::new();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for n in [1usize, 3] {
        let (pool, lanes) = fleet_sizing(n, cores);
        let mut extra = Vec::new();
        if n > 1 {
            for _ in 0..n {
                extra.push(fx.sized_instance(pool, lanes).await?);
            }
        }
        let clients: Vec<Client> =
            if extra.is_empty() { vec![fx.fresh_client()?] } else { extra.iter().map(|i| i.client.clone()).collect() };
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
            Some(one) if one.ops_per_sec > 0.0 => format!(
                "cycles/s; {n} instances / 1 = {:.2}, each a pool of {pool} with {lanes} lease lane(s), the one at the \
                 defaults; {cpu}",
                row.ops_per_sec / one.ops_per_sec
            ),
            _ => format!("cycles/s; {n} instance(s), one database, clients spread round-robin; {cpu}"),
        };
        rows.push(row.note(note));
    }
    Ok(rows)
}

/// One of `n` instances on a database with `cores` cores, sized as
/// docs/operations.md ("Sizing the PostgreSQL pool") says: a pool of
/// (2 × cores) / n connections, at least 4, and about one lease lane per
/// core over all instances, at least one each.
fn fleet_sizing(n: usize, cores: usize) -> (u32, usize) {
    let pool = u32::try_from((2 * cores / n.max(1)).max(4)).unwrap_or(u32::MAX);
    (pool, (cores / n.max(1)).max(1))
}

#[cfg(test)]
mod tests {
    #[test]
    fn three_instances_on_two_cores_get_four_connections_and_one_lane_each() {
        assert_eq!(super::fleet_sizing(3, 2), (4, 1));
        assert_eq!(super::fleet_sizing(3, 16), (10, 5));
    }
}
