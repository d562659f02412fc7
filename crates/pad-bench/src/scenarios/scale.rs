//! Scale: one workspace grown to each size in turn (bulk-seeded with SQL),
//! and at each size one client claims and releases random items, over HTTP
//! and through the store; latency is of the claim alone. Then a few
//! claim-next calls (each released again), whose frontier query is the one
//! lease path that looks at more than one row.

use std::time::{Duration, Instant};

use pad_core::FrontierFilter;

use super::{claim_body, claim_request, release_body, release_request};
use crate::fixture::{Fixture, task_ref};
use crate::{Result, Row, Samples, Sizes, progress, spread};

/// Claim-next samples per size, cut short after [`CLAIM_NEXT_BUDGET`].
const CLAIM_NEXT_SAMPLES: usize = 50;
const CLAIM_NEXT_BUDGET: Duration = Duration::from_secs(10);

pub async fn run(fx: &Fixture, s: &Sizes) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let ws = fx.workspace("scale").await?;
    let mut sizes = s.scale_items.clone();
    sizes.sort_unstable();
    let mut have = 0u64;
    let mut first = None;
    for size in sizes {
        if size > have {
            progress(&format!("{} scale: seeding {} items", fx.backend.name(), size - have));
            let t = Instant::now();
            let nums = fx.seed(&ws, size - have).await?;
            first.get_or_insert(nums.start);
            progress(&format!("{} scale: seeded in {:.1}s", fx.backend.name(), t.elapsed().as_secs_f64()));
            have = size;
        }
        let first = first.expect("seeded above");
        let pick = |k: usize| task_ref(first + spread(k as u64, have) as i64);
        let params = format!("items={have}");

        let (mut samples, started) = (Samples::default(), Instant::now());
        for k in 0..s.scale_samples {
            let r = pick(k);
            samples.time(fx.client.claim(&ws.slug, &r, &claim_body("scaler"))).await?;
            fx.client.release(&ws.slug, &r, &release_body("scaler")).await?;
        }
        rows.push(
            Row::new(fx.backend, "scale-claim", params.clone(), "http")
                .measured(samples.len() as u64, started.elapsed(), samples)
                .note("claim latency (random item, 1 client); ops/s counts claim+release"),
        );

        let (mut samples, started) = (Samples::default(), Instant::now());
        for k in 0..s.scale_samples {
            let r = pick(k + s.scale_samples).parse::<pad_core::ItemRef>()?;
            samples.time(fx.store.claim(&ws, &r, &claim_request(fx.owner, "scaler"))).await?;
            fx.store.release(&ws, &r, &release_request(fx.owner, "scaler")).await?;
        }
        rows.push(
            Row::new(fx.backend, "scale-claim", params.clone(), "store")
                .measured(samples.len() as u64, started.elapsed(), samples)
                .note("claim latency (random item, 1 caller); ops/s counts claim+release"),
        );

        let (mut samples, started) = (Samples::default(), Instant::now());
        let body = pad_core::api::ClaimNextBody {
            holder: Some("scaler".into()),
            ttl_seconds: Some(super::TTL_SECONDS.into()),
            filter: FrontierFilter::default(),
            ..Default::default()
        };
        while samples.len() < CLAIM_NEXT_SAMPLES && started.elapsed() < CLAIM_NEXT_BUDGET {
            let next = samples.time(fx.client.claim_next(&ws.slug, &body)).await?;
            let item = next.item.ok_or("claim-next found nothing on a full frontier")?;
            fx.client.release(&ws.slug, &item.item_ref.to_string(), &release_body("scaler")).await?;
        }
        rows.push(
            Row::new(fx.backend, "scale-claim-next", params, "http")
                .measured(samples.len() as u64, started.elapsed(), samples)
                .note("claim-next latency (1 client, each released); ops/s counts claim-next+release"),
        );
    }
    Ok(rows)
}
