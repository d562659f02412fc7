//! Contended claim: C clients race on M items over HTTP. A winner releases
//! at once, so the item is up for grabs again; a loser gets `lease_held`
//! (409) and tries the next pick. Latency is of the claim call alone.

use std::time::Instant;

use pad_client::ClientError;
use pad_core::api::ErrorCode;

use super::{claim_body, release_body};
use crate::fixture::{Fixture, task_ref};
use crate::{Deadline, Result, Row, Samples, Sizes, spread, workers};

pub async fn run(fx: &Fixture, s: &Sizes) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &m in &s.contended_items {
        let ws = fx.workspace(&format!("contended-{m}")).await?;
        let nums = fx.seed(&ws, m).await?;
        let deadline = Deadline::after(s.duration());
        let started = Instant::now();
        let per_worker = workers(s.clients, |w| {
            let (client, slug, first) = (fx.client.clone(), ws.slug.clone(), nums.start);
            async move {
                let holder = format!("racer-{w}");
                let (mut samples, mut wins, mut conflicts) = (Samples::default(), 0u64, 0u64);
                let mut i = 0u64;
                while !deadline.passed() {
                    let r = task_ref(first + spread((w as u64) << 32 | i, m) as i64);
                    i += 1;
                    match samples.time(client.claim(&slug, &r, &claim_body(&holder))).await {
                        Ok(_) => {
                            wins += 1;
                            client.release(&slug, &r, &release_body(&holder)).await?;
                        }
                        Err(ClientError::Api { code: ErrorCode::LeaseHeld, .. }) => conflicts += 1,
                        Err(e) => return Err(e.into()),
                    }
                }
                Ok((samples, wins, conflicts))
            }
        })
        .await?;
        let elapsed = started.elapsed();
        let wins: u64 = per_worker.iter().map(|p| p.1).sum();
        let conflicts: u64 = per_worker.iter().map(|p| p.2).sum();
        let attempts = wins + conflicts;
        let samples = Samples::merge(per_worker.into_iter().map(|p| p.0));
        let share = if attempts > 0 { 100.0 * conflicts as f64 / attempts as f64 } else { 0.0 };
        rows.push(
            Row::new(fx.backend, "contended-claim", format!("clients={} items={m}", s.clients), "http")
                .measured(attempts, elapsed, samples)
                .note(format!(
                    "claim attempts/s; {share:.1}% conflicts; {:.0} wins/s (each then released)",
                    wins as f64 / elapsed.as_secs_f64()
                )),
        );
    }
    Ok(rows)
}
