//! A batched drain, as `pad drain --jobs J` runs one: a single supervisor
//! claims as many items as it has free slots in one claim-next (`count`),
//! and completes each job as it ends (one request per item), so a drained
//! item costs 1 + 1/J requests instead of 2. Checks every item was handed
//! out exactly once (L11). Reports the CPU time per item of the in-process
//! `pad serve`, of the load generator (the supervisor, on threads of its
//! own) and of PostgreSQL.

use std::collections::HashSet;
use std::time::Instant;

use pad_core::api::{ClaimNextBody, CompleteBody};

use super::TTL_SECONDS;
use crate::cpu::Cpu;
use crate::fixture::Fixture;
use crate::{Result, Row, Samples, Sizes, on_load};
use pad_client::Client;

pub async fn run(fx: &Fixture, s: &Sizes) -> Result<Vec<Row>> {
    let jobs: u32 = 8;
    let ws = fx.workspace(&format!("batch-{jobs}")).await?;
    fx.seed(&ws, s.drain_items).await?;
    let (client, slug) = (fx.fresh_client()?, ws.slug.clone());
    let cpu = Cpu::now();
    let started = Instant::now();
    // The supervisor and its jobs run on the load generator's runtime.
    let (samples, got, requests) = on_load(supervise(client, slug, jobs)).await?;
    let elapsed = started.elapsed();
    let cpu = Cpu::now().per_item_since(cpu, got.len() as u64);
    let distinct = got.iter().collect::<HashSet<_>>().len();
    if got.len() as u64 != s.drain_items || distinct != got.len() {
        return Err(
            format!("batched drain handed out {} items ({distinct} distinct) of {}", got.len(), s.drain_items).into()
        );
    }
    let per_item = requests as f64 / got.len().max(1) as f64;
    Ok(vec![
        Row::new(fx.backend, "drain-batched", format!("jobs={jobs} items={}", s.drain_items), "http")
            .measured(got.len() as u64, elapsed, samples)
            .note(format!(
                "items/s; one supervisor, claim-next count=free slots + complete per job, {per_item:.2} requests per item; each item once; {cpu}"
            )),
    ])
}

/// One supervisor with `jobs` slots: claims as many items as slots are
/// free, completes each as its job ends. The latencies, the refs handed out
/// and the requests made.
async fn supervise(client: Client, slug: String, jobs: u32) -> Result<(Samples, Vec<String>, u64)> {
    let holder = "supervisor".to_string();
    let (mut samples, mut got, mut requests) = (Samples::default(), Vec::new(), 0u64);
    let mut running = tokio::task::JoinSet::new();
    loop {
        // Jobs that ended while the last claim was in flight free their
        // slots first: the next claim asks for all of them at once.
        while let Some(ended) = running.try_join_next() {
            samples.record(ended.map_err(|e| e.to_string())??);
            requests += 1;
        }
        let free = jobs - running.len() as u32;
        let mut granted = 0;
        if free > 0 {
            let body = ClaimNextBody {
                holder: Some(holder.clone()),
                ttl_seconds: Some(TTL_SECONDS.into()),
                count: Some(i64::from(free)),
                ..ClaimNextBody::default()
            };
            let next = client.claim_next(&slug, &body).await?;
            requests += 1;
            granted = next.grants.len();
            for g in next.grants {
                let (client, slug, holder) = (client.clone(), slug.clone(), holder.clone());
                let r = g.item.item_ref.to_string();
                got.push(r.clone());
                running.spawn(async move {
                    let t = Instant::now();
                    let done = CompleteBody {
                        epoch: Some(g.lease.epoch),
                        lease_id: Some(g.lease.lease_id),
                        holder: Some(holder),
                        status: None,
                        next: None,
                    };
                    client.complete(&slug, &r, &done).await.map(|_| t.elapsed())
                });
            }
        }
        if running.is_empty() {
            break;
        }
        if free == 0 || granted == 0 {
            // Every slot busy, or nothing left to claim: wait for a job to end.
            let ended = running.join_next().await.expect("a job runs");
            samples.record(ended.map_err(|e| e.to_string())??);
            requests += 1;
        }
    }
    Ok((samples, got, requests))
}
