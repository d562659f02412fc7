//! Webhook delivery (docs/webhooks.md): every instance runs [`deliver_loop`],
//! which claims due outbox rows from the store (each row goes to exactly one
//! instance), POSTs each event signed with its subscription's secret, and
//! reports the attempt back; the store logs it and decides delivered, retry
//! later or failed (`pad_core::webhook::after_attempt`).

use std::time::{Duration, Instant};

use hmac::{KeyInit, Mac};
use pad_core::Event;
use pad_store::{AttemptResult, DueDelivery};
use rand::Rng;
use sha2::Sha256;

use crate::AppState;

/// How long one delivery may take, connection included.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a claim lasts: past it, another instance may retry the row (an
/// instance that died mid-delivery). Longer than any delivery takes.
pub const CLAIM_HOLD_SECONDS: i64 = 30;
/// How often each instance looks for due deliveries besides after its own
/// writes: retries come due, and other instances' events arrive, this way.
pub const POLL_PERIOD: Duration = Duration::from_secs(1);
/// Deliveries claimed (and sent concurrently) per round.
const CLAIM_BATCH: u32 = 32;
/// Writes that arrive within this of a round share the next one: a write's
/// wake-up says "something may be due", not how much, and under load one
/// look per write would cost a store read per write.
const WRITE_COALESCE: Duration = Duration::from_millis(10);

pub const SECRET_PREFIX: &str = "whsec_";
pub const SIGNATURE_HEADER: &str = "x-pad-signature";

/// A fresh signing secret: 32 random bytes.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{SECRET_PREFIX}{}", hex::encode(bytes))
}

/// `sha256=<hex HMAC-SHA256 of body keyed by secret>`, the `X-Pad-Signature`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The client deliveries go through: bounded in time, never following a
/// redirect (a receiver that moved must be re-subscribed by an owner).
pub fn client() -> &'static reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .timeout(DELIVERY_TIMEOUT)
            .connect_timeout(DELIVERY_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("pad-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("the webhook HTTP client builds")
    })
}

/// POSTs `event` to `url` once and says what came back.
pub async fn send(
    http: &reqwest::Client,
    url: &str,
    secret: &str,
    workspace: &str,
    event: &Event,
    attempt: u32,
) -> AttemptResult {
    let started = Instant::now();
    let body = serde_json::to_vec(event).expect("events serialize");
    let sent = http
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(SIGNATURE_HEADER, signature(secret, &body))
        .header("x-pad-event-id", event.id.to_string())
        .header("x-pad-event-type", &event.kind)
        .header("x-pad-workspace", workspace)
        .header("x-pad-delivery-attempt", attempt.to_string())
        .body(body)
        .send()
        .await;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    match sent {
        Ok(resp) => {
            let status = resp.status();
            let error = (!status.is_success()).then(|| format!("HTTP {status}"));
            AttemptResult { status_code: Some(status.as_u16()), error, duration_ms }
        }
        // Without the URL: it may carry a token of the receiver's.
        Err(e) => AttemptResult { status_code: None, error: Some(describe(&e)), duration_ms },
    }
}

fn describe(e: &reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_builder() {
        "unusable URL"
    } else {
        "request failed"
    };
    let mut detail = String::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        detail = s.to_string();
        source = s.source();
    }
    if detail.is_empty() { what.to_string() } else { format!("{what}: {detail}") }
}

/// Delivers until the server stops: after writes through this instance (one
/// round per [`WRITE_COALESCE`] at most)
/// and every [`POLL_PERIOD`], claims what is due and sends it.
pub async fn deliver_loop(s: AppState) {
    let http = client();
    let mut writes = s.writes.subscribe();
    let mut tick = tokio::time::interval(POLL_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_round = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = writes.recv() => {
                tokio::time::sleep_until(last_round + WRITE_COALESCE).await;
            }
        }
        // The writes so far are all covered by this round.
        while !matches!(
            writes.try_recv(),
            Err(tokio::sync::broadcast::error::TryRecvError::Empty
                | tokio::sync::broadcast::error::TryRecvError::Closed)
        ) {}
        last_round = tokio::time::Instant::now();
        // A full batch may mean more is due: go again at once.
        while let Ok(n) = round(&s, http).await
            && n == CLAIM_BATCH as usize
        {}
    }
}

/// One claim and its deliveries, concurrently (each is a different
/// subscription's oldest event, so order per subscription holds).
async fn round(s: &AppState, http: &reqwest::Client) -> Result<usize, ()> {
    let due = s
        .store
        .claim_webhook_deliveries(CLAIM_BATCH, CLAIM_HOLD_SECONDS)
        .await
        .map_err(|e| tracing::warn!(error = %e, "could not claim webhook deliveries"))?;
    let n = due.len();
    let sends = due.into_iter().map(|d| deliver(s, http, d));
    futures::future::join_all(sends).await;
    Ok(n)
}

async fn deliver(s: &AppState, http: &reqwest::Client, due: DueDelivery) {
    let attempt = due.attempts + 1;
    let result = send(http, &due.url, &due.secret, &due.workspace, &due.event, attempt).await;
    tracing::debug!(webhook = due.webhook_id, event = due.event.id, attempt, status = ?result.status_code, "webhook delivery");
    if let Err(e) = s.store.finish_webhook_delivery(&due, &result).await {
        // The claim runs out and the row is retried: at least once.
        tracing::warn!(error = %e, webhook = due.webhook_id, event = due.event.id, "could not record a webhook delivery");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_is_rfc_4231_hmac_sha256() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let s = new_secret();
        assert!(s.starts_with(SECRET_PREFIX) && s.len() == SECRET_PREFIX.len() + 64);
        assert_ne!(s, new_secret());
    }
}
