//! A batched drain, as `pad drain --jobs J` runs one: a single supervisor
//! claims as many items as it has free slots in one claim-next (`count`),
//! and completes each job as it ends with the claim of the item for its
//! slot in the same request (docs/api.md, "The next item in the same
//! call"), so a drained item costs one request. Checks every item was
//! handed out exactly once (L11). Reports the CPU time per item of the in-process
//! `pad serve`, of the load generator (the supervisor, on threads of its
//! own) and of PostgreSQL.

use std::collections::HashSet;
use std::time::Instant;

use pad_core::api::ClaimNextBody;

use super::{claim_next_body, done_and_next};
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
                "items/s; one supervisor, claim-next count=slots, then a complete per job carrying the next claim, {per_item:.2} requests per item; each item once; {cpu}"
            )),
    ])
}

/// One supervisor with `jobs` slots: claims an item for each, then each
/// slot completes its item and takes the next in one request until none is
/// left (the backlog does not grow, so a slot that found none stays free).
/// The latencies, the refs handed out and the requests made.
async fn supervise(client: Client, slug: String, jobs: u32) -> Result<(Samples, Vec<String>, u64)> {
    let holder = "supervisor".to_string();
    let claim = claim_next_body(&holder);
    let first = ClaimNextBody { count: Some(i64::from(jobs)), ..claim.clone() };
    let grants = client.claim_next(&slug, &first).await?.grants;
    let mut running = tokio::task::JoinSet::new();
    for g in grants {
        let (client, slug, claim) = (client.clone(), slug.clone(), claim.clone());
        running.spawn(async move {
            let (mut samples, mut got, mut requests) = (Samples::default(), Vec::new(), 0u64);
            let mut grant = Some((g.item.item_ref.to_string(), g.lease));
            while let Some((r, lease)) = grant.take() {
                let t = Instant::now();
                let answer =
                    client.complete(&slug, &r, &done_and_next(&lease, &claim)).await.map_err(|e| e.to_string())?;
                requests += 1;
                samples.record(t.elapsed());
                got.push(r);
                let next = answer.next.ok_or_else(|| format!("the next claim failed: {:?}", answer.next_error))?;
                grant = next.item.zip(next.lease).map(|(item, lease)| (item.item_ref.to_string(), lease));
            }
            Ok::<_, String>((samples, got, requests))
        });
    }
    let (mut samples, mut got, mut requests) = (Vec::new(), Vec::new(), 1u64);
    while let Some(slot) = running.join_next().await {
        let (s, g, n) = slot.map_err(|e| e.to_string())??;
        samples.push(s);
        got.extend(g);
        requests += n;
    }
    Ok((Samples::merge(samples), got, requests))
}
