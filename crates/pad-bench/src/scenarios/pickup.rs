//! Pickup latency: an idle worker waits in a long-polling claim-next
//! (`wait_seconds`); another client creates an item; the figure is the time
//! from the create's answer to the waiter's grant. The note counts the
//! waiter's requests: one per item, none while idle (docs/api.md, "Batches
//! and long polls").

use std::time::Instant;

use pad_core::api::{ClaimNextBody, CompleteBody};

use super::TTL_SECONDS;
use crate::fixture::Fixture;
use crate::{Result, Row, Samples, Sizes};

pub async fn run(fx: &Fixture, s: &Sizes) -> Result<Vec<Row>> {
    let ws = fx.workspace("pickup").await?;
    let rounds = s.pickup_rounds;
    let (client, slug) = (fx.client.clone(), ws.slug.clone());
    let mut samples = Samples::default();
    let mut requests = 0u64;
    let started = Instant::now();
    for round in 0..rounds {
        let waiter = {
            let (client, slug) = (client.clone(), slug.clone());
            tokio::spawn(async move {
                let body = ClaimNextBody {
                    holder: Some("idle-worker".into()),
                    ttl_seconds: Some(TTL_SECONDS.into()),
                    wait_seconds: Some(25),
                    ..ClaimNextBody::default()
                };
                let got = client.claim_next(&slug, &body).await;
                (got, Instant::now())
            })
        };
        // Let the waiter reach its wait: the server's gauge says when.
        while fx.waiting() == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let new = pad_core::NewItem { title: format!("pickup {round}"), ..Default::default() };
        client.create_item(&slug, &new).await?;
        let created = Instant::now();
        let (got, at) = waiter.await.map_err(|e| e.to_string())?;
        requests += 1;
        let got = got?;
        let (Some(item), Some(lease)) = (got.item, got.lease) else {
            return Err(format!("round {round}: the waiting claim-next answered empty").into());
        };
        samples.record(at.saturating_duration_since(created));
        let done = CompleteBody { epoch: Some(lease.epoch), holder: Some("idle-worker".into()), ..Default::default() };
        client.complete(&slug, &item.item_ref.to_string(), &done).await?;
    }
    Ok(vec![
        Row::new(fx.backend, "pickup", format!("rounds={rounds}"), "http")
            .measured(rounds, started.elapsed(), samples)
            .note(format!(
                "latency from an item's creation to an idle long-polling worker's grant; {requests} claim-next requests for {rounds} items, none while idle"
            )),
    ])
}
