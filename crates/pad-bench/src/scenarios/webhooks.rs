//! Webhooks beside writes (docs/webhooks.md, "Isolation"): W writers create
//! items over HTTP beside another workspace that just recorded Q/20 events,
//! first with no subscriptions there, then with 20 dead receivers (a port
//! nothing listens on) and Q deliveries queued behind them. The second run's
//! p95 should stay near the first's: a queue behind a waiting head costs no
//! write.

use std::time::Instant;

use pad_core::NewItem;
use pad_core::webhook::CreateWebhook;

use crate::fixture::Fixture;
use crate::{Deadline, Result, Row, Samples, Sizes, workers};

/// Dead receivers, each subscribed to every event of one workspace.
const DEAD_RECEIVERS: usize = 20;
/// Writers creating items in the measured workspace.
const WRITERS: usize = 8;

pub async fn run(fx: &Fixture, s: &Sizes) -> Result<Vec<Row>> {
    // The same run twice: a flood of events in one workspace, then the
    // measurement in another; first with no receivers, then with dead ones.
    flood(fx, "hooks-quiet-flood", 0, s).await?;
    let quiet = create_items(fx, "hooks-quiet", s).await?;
    let quiet_p95 = quiet.1.percentile(0.95).unwrap_or(0.0);
    let mut rows = vec![row(fx, 0, 0, quiet, String::new())];

    let queued = flood(fx, "hooks-dead", DEAD_RECEIVERS, s).await?;
    let loaded = create_items(fx, "hooks-beside", s).await?;
    let loaded_p95 = loaded.1.percentile(0.95).unwrap_or(0.0);
    let ratio = if quiet_p95 > 0.0 { loaded_p95 / quiet_p95 } else { 0.0 };
    let note = format!("p95 {loaded_p95:.2} ms, {ratio:.2}× the run without receivers ({quiet_p95:.2} ms)");
    rows.push(row(fx, DEAD_RECEIVERS, queued, loaded, note));
    Ok(rows)
}

/// A workspace `slug` with `receivers` subscriptions to a port that refuses,
/// and enough events for `s.webhook_queued` deliveries to them (the same
/// events with none). Answers the deliveries queued.
async fn flood(fx: &Fixture, slug: &str, receivers: usize, s: &Sizes) -> Result<i64> {
    let ws = fx.workspace(slug).await?;
    // A port that refuses: bound once, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    for i in 0..receivers {
        let hook = CreateWebhook { url: format!("http://127.0.0.1:{port}/{i}"), events: vec![] };
        fx.store.create_webhook(&ws, fx.owner, &hook, "bench").await?;
    }
    // Each event queues one delivery per receiver.
    let events = s.webhook_queued.div_ceil(DEAD_RECEIVERS as u64);
    workers(WRITERS, |w| {
        let (store, ws, owner) = (fx.store.clone(), ws.clone(), fx.owner);
        async move {
            for i in (w as u64..events).step_by(WRITERS) {
                store.create_item(&ws, owner, &NewItem { title: format!("flood {i}"), ..Default::default() }).await?;
            }
            Ok(())
        }
    })
    .await?;
    Ok(fx.store.list_webhooks(&ws).await?.iter().map(|h| h.pending).sum())
}

fn row(fx: &Fixture, dead: usize, queued: i64, (ops, samples, took): Measured, note: String) -> Row {
    let p95 = samples.percentile(0.95).unwrap_or(0.0);
    let note = if note.is_empty() {
        format!("item creations/s; p95 {p95:.2} ms")
    } else {
        format!("item creations/s; {note}")
    };
    Row::new(fx.backend, "webhooks", format!("writers={WRITERS} dead={dead} queued={queued}"), "http")
        .measured(ops, took, samples)
        .note(note)
}

/// Item creations, their latencies, and how long the run took.
type Measured = (u64, Samples, std::time::Duration);

/// [`WRITERS`] clients creating items in a fresh workspace `slug` for the run's duration.
async fn create_items(fx: &Fixture, slug: &str, s: &Sizes) -> Result<Measured> {
    let ws = fx.workspace(slug).await?;
    let deadline = Deadline::after(s.duration());
    let started = Instant::now();
    let per_worker = workers(WRITERS, |w| {
        let (client, slug) = (fx.client.clone(), ws.slug.clone());
        async move {
            let mut samples = Samples::default();
            let mut i = 0u64;
            while !deadline.passed() {
                let body = NewItem { title: format!("writer {w} item {i}"), ..Default::default() };
                samples.time(client.create_item(&slug, &body)).await?;
                i += 1;
            }
            Ok(samples)
        }
    })
    .await?;
    let took = started.elapsed();
    let samples = Samples::merge(per_worker);
    Ok((samples.len() as u64, samples, took))
}
