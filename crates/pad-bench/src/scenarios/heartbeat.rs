//! Heartbeat: L live leases (taken through the store, untimed), renewed over
//! HTTP by R workers, each going round its share of the items until the
//! deadline. Every renew must succeed (L4: live, matching epoch).

use std::time::Instant;

use pad_core::api::RenewBody;

use super::claim_request;
use crate::fixture::{Fixture, task_item_ref, task_ref};
use crate::{Deadline, Result, Row, Samples, Sizes, workers};

const HOLDER: &str = "heart";

pub async fn run(fx: &Fixture, s: &Sizes) -> Result<Vec<Row>> {
    let ws = fx.workspace("heartbeat").await?;
    let nums = fx.seed(&ws, s.leases).await?;
    // Take the leases with a few parallel store callers: setup, not measured.
    let takers = 8usize;
    let epochs = workers(takers, |t| {
        let (store, ws, owner, nums) = (fx.store.clone(), ws.clone(), fx.owner, nums.clone());
        async move {
            let mut epochs = Vec::new();
            for n in nums.clone().skip(t).step_by(takers) {
                let out = store.claim(&ws, &task_item_ref(n), &claim_request(owner, HOLDER)).await?;
                epochs.push((n, out.lease.epoch));
            }
            Ok(epochs)
        }
    })
    .await?;
    let mut leases: Vec<(i64, i64)> = epochs.into_iter().flatten().collect();
    leases.sort_unstable();
    let leases = std::sync::Arc::new(leases);
    let r = s.renewers;
    let deadline = Deadline::after(s.duration());
    let started = Instant::now();
    let per_worker = workers(r, |w| {
        let (client, slug, leases) = (fx.client.clone(), ws.slug.clone(), leases.clone());
        async move {
            let mut samples = Samples::default();
            let mine: Vec<&(i64, i64)> = leases.iter().skip(w).step_by(r).collect();
            'outer: loop {
                for &&(n, epoch) in &mine {
                    if deadline.passed() {
                        break 'outer;
                    }
                    let body = RenewBody { epoch: Some(epoch), holder: Some(HOLDER.into()), ..RenewBody::default() };
                    samples.time(client.renew(&slug, &task_ref(n), &body)).await?;
                }
            }
            Ok(samples)
        }
    })
    .await?;
    let elapsed = started.elapsed();
    let samples = Samples::merge(per_worker);
    Ok(vec![
        Row::new(fx.backend, "heartbeat", format!("leases={} renewers={r}", s.leases), "http")
            .measured(samples.len() as u64, elapsed, samples)
            .note("renews/s, every one succeeded"),
    ])
}
