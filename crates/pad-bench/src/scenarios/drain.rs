//! Claim-next drain: W workers empty a backlog of N items over HTTP, each
//! item the way `pad drain --done-on-success` handles it: a complete
//! (status `done` and the lease's end in one fenced request, L15) that
//! claims the next item in the same request (docs/api.md, "The next item in
//! the same call"), after one claim-next for the first. About one request
//! per item; the row reports the requests actually made per item, and the
//! rate of the first tenth of the items against the last (a drain must go
//! as fast at its end as at its start: docs/operations.md, "Long drains and
//! VACUUM"). Checks every item was handed out exactly once (L11).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::{claim_next_body, done_and_next};
use crate::cpu::Cpu;
use crate::fixture::Fixture;
use crate::{Result, Row, Samples, Sizes, workers};
use pad_client::Client;

pub async fn run(fx: &Fixture, s: &Sizes) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &w in &s.drain_workers {
        let ws = fx.workspace(&format!("drain-{w}")).await?;
        fx.seed(&ws, s.drain_items).await?;
        let load = fx.fresh_client()?;
        let cpu = Cpu::now();
        let started = Instant::now();
        let per_worker = workers(w, |i| worker(load.clone(), ws.slug.clone(), format!("drainer-{i}"), started)).await?;
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
        // Each worker's last claim-next found nothing: counted, as a drain makes it.
        let requests: u64 = per_worker.iter().map(|p| p.2).sum();
        let per_item = requests as f64 / refs.len().max(1) as f64;
        let mut done_at: Vec<Duration> = per_worker.iter().flat_map(|p| p.3.iter().copied()).collect();
        done_at.sort();
        let samples = Samples::merge(per_worker.into_iter().map(|p| p.0));
        rows.push(
            Row::new(fx.backend, "drain", format!("workers={w} items={}", s.drain_items), "http")
                .measured(refs.len() as u64, elapsed, samples)
                .note(format!(
                    "items/s; complete with the next claim, {per_item:.2} requests per item; each item once; {}; {}",
                    tenths(&done_at),
                    Cpu::now().per_item_since(cpu, refs.len() as u64)
                )),
        );
    }
    Ok(rows)
}

/// What one drain worker did: its latencies, the refs it was handed, the
/// requests it made, and when (from `started`) it finished each item.
pub type Drained = (Samples, Vec<String>, u64, Vec<Duration>);

/// One worker of a drain through `client`: a claim-next, then a complete
/// carrying the next claim per item, until none is left. Shared with the
/// HTTP floor (`scenarios::floor`), which answers the same routes.
pub async fn worker(client: Client, slug: String, holder: String, started: Instant) -> Result<Drained> {
    let (mut samples, mut got, mut requests) = (Samples::default(), Vec::new(), 0u64);
    let mut done_at = Vec::new();
    let claim = claim_next_body(&holder);
    let mut t = Instant::now();
    let mut next = client.claim_next(&slug, &claim).await?;
    requests += 1;
    while let (Some(item), Some(lease)) = (next.item, next.lease) {
        let r = item.item_ref.to_string();
        let answer = client.complete(&slug, &r, &done_and_next(&lease, &claim)).await?;
        requests += 1;
        samples.record(t.elapsed());
        t = Instant::now();
        next = match (answer.next, answer.next_error) {
            (Some(next), _) => next,
            (None, e) => return Err(format!("{r}: the next claim failed: {e:?}").into()),
        };
        got.push(r);
        done_at.push(started.elapsed());
    }
    Ok((samples, got, requests, done_at))
}

/// The items/s of the first tenth of a drain's items and of the last, from
/// the moments each item was done (sorted, from the drain's start).
pub fn tenths(done_at: &[Duration]) -> String {
    let tenth = done_at.len() / 10;
    if tenth == 0 {
        return "too few items for tenths".into();
    }
    let rate = |span: Duration| tenth as f64 / span.as_secs_f64().max(1e-9);
    let first = rate(done_at[tenth - 1]);
    let last = rate(done_at[done_at.len() - 1] - done_at[done_at.len() - 1 - tenth]);
    format!("first/last tenth {first:.0}/{last:.0} items/s")
}
