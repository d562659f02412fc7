//! Webhook delivery (docs/webhooks.md): every instance runs [`deliver_loop`],
//! which claims due outbox rows from the store (each row goes to exactly one
//! instance), POSTs each event signed with its subscription's secret, and
//! reports the attempt back; the store logs it and decides delivered, retry
//! later or failed (`pad_core::webhook::after_attempt`). Sends run as tasks
//! of their own, so a receiver that hangs holds only its own queue, and the
//! store claims no more than `DueDelivery::IN_FLIGHT_PER_ACCOUNT` of one
//! account's deliveries at once, so one account's receivers hold only its
//! own share (docs/webhooks.md, "Isolation").

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use hmac::{KeyInit, Mac};
use pad_core::webhook::Payload;
use pad_store::{AttemptResult, DueDelivery};
use sha2::Sha256;

use crate::AppState;

/// How long one delivery may take, connection included.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a claim lasts: past it, another instance may retry the row (an
/// instance that died mid-delivery). Longer than any delivery takes.
pub const CLAIM_HOLD_SECONDS: i64 = 30;
/// How often each instance looks for due deliveries besides after the events
/// it commits: retries come due, and other instances' events arrive, this way.
pub const POLL_PERIOD: Duration = Duration::from_secs(1);
/// Deliveries claimed per look (a full one looks again at once). An
/// account's deliveries past its cap are not in it: they stay unclaimed and
/// due, and are claimed by a later look, once one of its sends has ended.
const CLAIM_BATCH: usize = 32;
/// Deliveries in flight at once on this instance. Each subscription has at
/// most one, a workspace at most 20 subscriptions, and an account, however
/// many workspaces it has, at most `DueDelivery::IN_FLIGHT_PER_ACCOUNT`
/// (32) across the instances: the store leaves an account's due rows
/// unclaimed while it has that many under a running claim, so rows never
/// wait here for a slot, and one account's hanging receivers cannot take
/// more than an eighth of these (docs/webhooks.md, "Isolation").
pub const MAX_IN_FLIGHT: usize = 256;
/// How often the queues are trimmed to `WEBHOOK_QUEUE_MAX` (docs/webhooks.md,
/// "A full queue"): each look reads up to that many rows per subscription,
/// so not after every write.
pub const TRIM_PERIOD: Duration = Duration::from_secs(10);
/// Events committed within this of a round share the next one: a wake-up
/// says "something may be due", not how much, and under load one look per
/// event would cost a store read per event.
const WRITE_COALESCE: Duration = Duration::from_millis(10);

pub const SECRET_PREFIX: &str = "whsec_";
pub const SIGNATURE_HEADER: &str = "x-pad-signature";

/// A fresh signing secret: 32 random bytes.
pub fn new_secret() -> String {
    format!("{SECRET_PREFIX}{}", crate::auth::random_hex::<32>())
}

/// `sha256=<hex HMAC-SHA256 of body keyed by secret>`, the `X-Pad-Signature`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Where deliveries may go (docs/webhooks.md, "Where deliveries go"): by
/// default only to public addresses, checked after the host's name resolves;
/// with `allow_private` (`PAD_WEBHOOK_ALLOW_PRIVATE=1`, or `true`, `yes`,
/// `on`), anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Targets {
    pub allow_private: bool,
}

impl Targets {
    pub const ENV: &str = "PAD_WEBHOOK_ALLOW_PRIVATE";

    /// The operator's choice, read once when the server's state is made; a
    /// value that is neither yes nor no is an error, so the server does not
    /// start on a guess about a safety switch.
    pub fn from_env() -> Result<Self, String> {
        pad_core::flag::from_env(Self::ENV).map(|allow_private| Targets { allow_private })
    }

    /// [`Targets::from_env`] for the value given.
    pub fn from_value(value: Option<&str>) -> Result<Self, String> {
        pad_core::flag::parse(Self::ENV, value).map(|allow_private| Targets { allow_private })
    }

    /// The client for these targets: bounded in time, never following a
    /// redirect (a receiver that moved must be re-subscribed by an owner),
    /// and unless private targets are allowed, resolving names only to
    /// public addresses, so a name cannot turn private between the check in
    /// [`send`] and the connection.
    pub fn client(self) -> &'static reqwest::Client {
        static ANY: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
        static PUBLIC: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
        let build = |public: bool| {
            let b = reqwest::Client::builder()
                .timeout(DELIVERY_TIMEOUT)
                .connect_timeout(DELIVERY_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("pad-webhooks/", env!("CARGO_PKG_VERSION")));
            let b = if public { b.dns_resolver(PublicOnly) } else { b };
            b.build().expect("the webhook HTTP client builds")
        };
        if self.allow_private { ANY.get_or_init(|| build(false)) } else { PUBLIC.get_or_init(|| build(true)) }
    }

    /// Whether a delivery may go to `url`: `Err` with the one refusal text
    /// when its host is, or resolves to, a non-public address. The refusal
    /// is the same whatever listens there, so it reveals nothing about ports.
    async fn check(self, url: &str) -> Result<(), String> {
        if self.allow_private {
            return Ok(());
        }
        // The URL parser reads every spelling of an address (`0x7f.0.0.1`,
        // `2130706433`, `127.1`, `[::ffff:127.0.0.1]`) as the address it is.
        let url = reqwest::Url::parse(url).map_err(|_| "unusable URL".to_string())?;
        let port = url.port_or_known_default().unwrap_or(80);
        let host = url.host_str().ok_or_else(|| "unusable URL".to_string())?;
        let literal = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(v6) => v6.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::from),
            None => host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::from),
        };
        let addrs: Vec<IpAddr> = match literal {
            Some(ip) => vec![ip],
            None => match tokio::net::lookup_host((host, port)).await {
                Ok(found) => found.map(|a| a.ip()).collect(),
                Err(_) => return Err("could not resolve the host".into()),
            },
        };
        if addrs.is_empty() || !addrs.iter().copied().all(is_public) {
            return Err(REFUSED.into());
        }
        Ok(())
    }
}

/// The answer for a target that is not public: the same for every such
/// address and port.
pub const REFUSED: &str = "refused: the host is or resolves to a loopback, private, link-local or \
     unspecified address (set PAD_WEBHOOK_ALLOW_PRIVATE=1 to allow)";

/// Whether `ip` is an address deliveries may reach by default: not loopback,
/// private (RFC 1918, fc00::/7), link-local, unspecified, shared (100.64/10),
/// broadcast, multicast, nor an IPv4 address written as IPv6.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => {
            let [first, second, ..] = a.octets();
            !(a.is_loopback()
                || a.is_private()
                || a.is_link_local()
                || a.is_unspecified()
                || a.is_broadcast()
                || a.is_multicast()
                || first == 0
                || (first == 100 && (64..128).contains(&second)))
        }
        IpAddr::V6(a) => {
            let first = a.segments()[0];
            let embeds_v4 = a.to_ipv4_mapped().is_some()
                || a.segments()[..6] == [0; 6]
                || a.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
            !(a.is_loopback()
                || a.is_unspecified()
                || a.is_multicast()
                || embeds_v4
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80)
        }
    }
}

/// A resolver that hands the connector public addresses only.
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let name = name.as_str().to_string();
        Box::pin(async move {
            let found = tokio::net::lookup_host((name.as_str(), 0)).await?;
            let public: Vec<SocketAddr> = found.filter(|a| is_public(a.ip())).collect();
            if public.is_empty() {
                return Err(std::io::Error::other(REFUSED).into());
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// POSTs `payload` to `url` once and says what came back; a target
/// `targets` refuses is not contacted at all.
pub async fn send(
    targets: Targets, url: &str, secret: &str, workspace: &str, payload: &Payload<'_>, attempt: u32,
) -> AttemptResult {
    let started = Instant::now();
    if let Err(refused) = targets.check(url).await {
        return AttemptResult { status_code: None, error: Some(refused), duration_ms: 0 };
    }
    let http = targets.client();
    let body = serde_json::to_vec(payload).expect("payloads serialize");
    let sent = http
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(SIGNATURE_HEADER, signature(secret, &body))
        .header("x-pad-event-id", payload.id.to_string())
        .header("x-pad-event-type", payload.kind)
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

/// Delivers until the server stops (dropping it aborts the sends in flight;
/// their claims run out and the rows are sent again: at least once). Looks
/// for due deliveries after events committed through this instance and
/// after each of its sends ends (one look per [`WRITE_COALESCE`] at most),
/// and every [`POLL_PERIOD`]; starts each claimed send as a task and never
/// waits for one before claiming more. Trims the queues every [`TRIM_PERIOD`].
pub async fn deliver_loop(s: AppState) {
    let mut wakes = s.wakes.subscribe();
    let mut tick = tokio::time::interval(POLL_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut trim = tokio::time::interval(TRIM_PERIOD);
    trim.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sending = tokio::task::JoinSet::new();
    let mut last_look = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = trim.tick() => {
                trim_queues(&s).await;
                continue;
            }
            _ = wakes.recv() => tokio::time::sleep_until(last_look + WRITE_COALESCE).await,
            Some(_) = sending.join_next(), if !sending.is_empty() => {
                tokio::time::sleep_until(last_look + WRITE_COALESCE).await;
            }
        }
        // The events and ended sends so far are all covered by this look.
        while !matches!(
            wakes.try_recv(),
            Err(tokio::sync::broadcast::error::TryRecvError::Empty
                | tokio::sync::broadcast::error::TryRecvError::Closed)
        ) {}
        while sending.try_join_next().is_some() {}
        last_look = tokio::time::Instant::now();
        // A full claim may mean more is due: go again at once, while there is room.
        loop {
            let room = MAX_IN_FLIGHT.saturating_sub(sending.len()).min(CLAIM_BATCH);
            if room == 0 {
                break;
            }
            let due = match s.store.claim_webhook_deliveries(room as u32, CLAIM_HOLD_SECONDS).await {
                Ok(due) => due,
                Err(e) => {
                    tracing::warn!(error = %e, "could not claim webhook deliveries");
                    break;
                }
            };
            let claimed = due.len();
            for d in due {
                // Each is a different subscription's oldest event, so order
                // per subscription holds however they interleave.
                sending.spawn(deliver(s.clone(), d));
            }
            if claimed < room {
                break;
            }
        }
    }
}

/// Drops what is past each queue's cap, counted in `/metrics`.
async fn trim_queues(s: &AppState) {
    match s.store.trim_webhook_queues(pad_core::webhook::WEBHOOK_QUEUE_MAX).await {
        Ok(0) => {}
        Ok(n) => {
            s.metrics.webhook_deliveries_dropped(n);
            tracing::warn!(dropped = n, "webhook queues were full: their oldest deliveries were dropped");
        }
        Err(e) => tracing::warn!(error = %e, "could not trim webhook queues"),
    }
}

async fn deliver(s: AppState, due: DueDelivery) {
    let attempt = due.attempts + 1;
    let result =
        send(s.webhook_targets, &due.url, &due.secret, &due.workspace, &Payload::from(&due.event), attempt).await;
    tracing::debug!(webhook = due.webhook_id, event = due.event.id, attempt, status = ?result.status_code, "webhook delivery");
    if let Err(e) = s.store.finish_webhook_delivery(&due, &result).await {
        // The claim runs out and the row is retried: at least once.
        tracing::warn!(error = %e, webhook = due.webhook_id, event = due.event.id, "could not record a webhook delivery");
    }
}

#[cfg(test)]
mod tests {
    /// `PAD_WEBHOOK_ALLOW_PRIVATE` takes the usual spellings of yes and no;
    /// anything else stops the server from starting, naming the setting.
    #[test]
    fn allow_private_takes_yes_and_no_and_refuses_the_rest() {
        use super::Targets;
        for yes in ["1", "true", "TRUE", "yes", "Yes", "on", " on "] {
            assert_eq!(Targets::from_value(Some(yes)), Ok(Targets { allow_private: true }), "{yes:?}");
        }
        for no in [None, Some(""), Some(" "), Some("0"), Some("false"), Some("No"), Some("OFF")] {
            assert_eq!(Targets::from_value(no), Ok(Targets { allow_private: false }), "{no:?}");
        }
        for bad in ["2", "y", "enable", "true!"] {
            let e = Targets::from_value(Some(bad)).unwrap_err();
            assert!(e.contains("PAD_WEBHOOK_ALLOW_PRIVATE") && e.contains(bad), "{e}");
        }
    }

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

    #[test]
    fn only_public_addresses_are_targets() {
        for ip in [
            "127.0.0.1",
            "127.1.2.3",
            "10.0.0.1",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:8.8.8.8",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "172.32.0.1"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }
}
