//! Claim-next drain: W workers empty a backlog of N items over HTTP, each
//! item the way `pad drain --done-on-success` handles it: claim-next, mark
//! done fenced by the lease epoch (L10), release. Three requests per item.
//! Checks every item was handed out exactly once (L11).

use std::collections::HashSet;
use std::time::Instant;

use pad_core::api::{ClaimNextBody, ReleaseBody};
use pad_core::{ItemPatch, Status};

use super::TTL_SECONDS;
use crate::fixture::Fixture;
use crate::{Result, Row, Samples, Sizes, workers};

pub async fn run(fx: &Fixture, s: &Sizes) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &w in &s.drain_workers {
        let ws = fx.workspace(&format!("drain-{w}")).await?;
        fx.seed(&ws, s.drain_items).await?;
        let started = Instant::now();
        let per_worker = workers(w, |i| {
            let (client, slug) = (fx.client.clone(), ws.slug.clone());
            async move {
                let holder = format!("drainer-{i}");
                let (mut samples, mut got) = (Samples::default(), Vec::new());
                loop {
                    let t = Instant::now();
                    let body = ClaimNextBody {
                        holder: Some(holder.clone()),
                        ttl_seconds: Some(TTL_SECONDS.into()),
                        ..ClaimNextBody::default()
                    };
                    let next = client.claim_next(&slug, &body).await?;
                    let (Some(item), Some(lease)) = (next.item, next.lease) else { break };
                    let r = item.item_ref.to_string();
                    let done =
                        ItemPatch { status: Some(Status::Done), lease_epoch: Some(lease.epoch), ..Default::default() };
                    client.update_item(&slug, &r, &done).await?;
                    let release =
                        ReleaseBody { holder: Some(holder.clone()), epoch: Some(lease.epoch), ..Default::default() };
                    client.release(&slug, &r, &release).await?;
                    samples.record(t.elapsed());
                    got.push(r);
                }
                Ok((samples, got))
            }
        })
        .await?;
        let elapsed = started.elapsed();
        let refs: Vec<String> = per_worker.iter().flat_map(|p| p.1.iter().cloned()).collect();
        let distinct = refs.iter().collect::<HashSet<_>>().len();
        if refs.len() as u64 != s.drain_items || distinct != refs.len() {
            return Err(format!(
                "drain with {w} workers handed out {} items ({distinct} distinct) of {}",
                refs.len(),
                s.drain_items
            )
            .into());
        }
        let samples = Samples::merge(per_worker.into_iter().map(|p| p.0));
        rows.push(
            Row::new(fx.backend, "drain", format!("workers={w} items={}", s.drain_items), "http")
                .measured(refs.len() as u64, elapsed, samples)
                .note("items/s; claim-next + fenced done + release; each item once"),
        );
    }
    Ok(rows)
}
