//! Webhooks (docs/webhooks.md): what a subscription may be, the wire shapes
//! of its routes, and the retry rule of its deliveries, as pure functions.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::EventKind;
use crate::validate::{self, Lines, ValidationError};

/// Subscriptions one workspace may hold.
pub const WEBHOOKS_PER_WORKSPACE_MAX: i64 = 20;
/// The longest URL a subscription may name, in characters.
pub const WEBHOOK_URL_MAX: usize = 2048;
/// Attempts per event before the delivery is given up as `failed`.
pub const WEBHOOK_MAX_ATTEMPTS: u32 = 15;
/// The longest wait between two attempts.
pub const WEBHOOK_BACKOFF_MAX: Duration = Duration::from_secs(3600);
/// The type of the delivery `POST …/webhooks/{id}/test` sends; never a
/// stored event.
pub const TEST_EVENT: &str = "webhook.test";
/// What one delivery POSTs: a logged event, or the [`TEST_EVENT`] ping,
/// which has an event's shape but is none of the log's kinds.
#[derive(Debug, Serialize)]
pub struct Payload<'a> {
    pub id: i64,
    #[serde(rename = "type")]
    pub kind: &'a str,
    #[serde(rename = "ref")]
    pub item_ref: Option<&'a str>,
    pub actor: Option<&'a str>,
    pub at: DateTime<Utc>,
    pub data: &'a serde_json::Value,
}

impl<'a> From<&'a crate::Event> for Payload<'a> {
    fn from(e: &'a crate::Event) -> Self {
        Payload {
            id: e.id,
            kind: e.kind.as_str(),
            item_ref: e.item_ref.as_deref(),
            actor: e.actor.as_deref(),
            at: e.at,
            data: &e.data,
        }
    }
}

/// Delivery log entries kept per subscription (older ones are dropped).
pub const DELIVERIES_KEPT: i64 = 500;
/// Deliveries one subscription may have queued; past it the oldest are
/// dropped and counted (docs/webhooks.md, "A full queue").
pub const WEBHOOK_QUEUE_MAX: i64 = 10_000;

/// A subscription as the API shows it. The secret is never in it: it is
/// shown once, in [`WebhookCreated`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Webhook {
    pub id: i64,
    pub url: String,
    /// The event types delivered; empty: every type.
    pub events: Vec<EventKind>,
    /// Who created it.
    pub created_by: Option<String>,
    pub created_at: DateTime<Utc>,
    /// Events waiting to be delivered to it.
    pub pending: i64,
    /// Whether deliveries are paused: an event failed for good, and nothing
    /// is sent until an owner resumes it (docs/webhooks.md, "Paused subscriptions").
    pub paused: bool,
    /// When it was paused; `null` while active.
    pub paused_at: Option<DateTime<Utc>>,
    /// Queued deliveries dropped, ever, because its queue was full
    /// (docs/webhooks.md, "A full queue").
    pub dropped: i64,
}

/// `POST /api/v1/workspaces/{ws}/webhooks`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhook {
    /// `http://` or `https://`, at most 2048 characters.
    #[schema(min_length = 8, max_length = 2048)]
    pub url: String,
    /// The event types to deliver; empty or absent: every type.
    #[serde(default)]
    pub events: Vec<EventKind>,
}

/// The creation answer: the signing secret is here and in no other answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WebhookCreated {
    /// The HMAC-SHA256 key of `X-Pad-Signature`.
    pub secret: String,
    #[serde(flatten)]
    pub webhook: Webhook,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WebhookList {
    pub webhooks: Vec<Webhook>,
}

crate::model::string_enum!(
    /// What one delivery attempt led to.
    DeliveryOutcome { Delivered = "delivered", Retrying = "retrying", Failed = "failed" }
);

/// One attempt of one delivery, as the delivery log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WebhookDelivery {
    pub id: i64,
    /// The event delivered; `null` for a `webhook.test` delivery.
    pub event_id: Option<i64>,
    pub event_type: String,
    /// 1 for the first attempt of this event.
    pub attempt: u32,
    /// The receiver's HTTP status; `null` when none came (refused, timed out).
    pub status_code: Option<u16>,
    /// Why the attempt did not get an answer, or the status's reason.
    pub error: Option<String>,
    pub duration_ms: u64,
    pub outcome: DeliveryOutcome,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeliveryList {
    /// Newest first.
    pub deliveries: Vec<WebhookDelivery>,
}

/// Query of `GET …/webhooks/{id}/deliveries`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeliveriesQuery {
    /// How many, newest first; default 50, values outside 1..=500 are clamped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// Only `http://` and `https://` URLs that can be delivered to: a host that
/// is a name (letters, digits, `-`, `.`, `_`), an IPv4 address or a bracketed
/// IPv6 address, and a port, if any, in 1–65535; bounded, on one line, with
/// no credentials. Which addresses a delivery may reach is decided when it
/// is sent, after the name resolves (docs/webhooks.md, "Where deliveries go").
pub fn validate_url(url: &str) -> Result<(), ValidationError> {
    validate::text("url", url, 1, WEBHOOK_URL_MAX, Lines::Single)?;
    let lower = url.to_ascii_lowercase();
    let Some(rest) = lower.strip_prefix("http://").or_else(|| lower.strip_prefix("https://")) else {
        return Err(ValidationError::new("url", "must be an http:// or https:// URL"));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(ValidationError::new("url", "must not carry credentials (user:password@); sign with the secret"));
    }
    let no_host = || ValidationError::new("url", "must name a host (http://HOST[:PORT]/PATH)");
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (addr, after) = v6.split_once(']').ok_or_else(no_host)?;
            if addr.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(ValidationError::new("url", "the host in [brackets] must be an IPv6 address"));
            }
            match after {
                "" => (addr, None),
                _ => (addr, Some(after.strip_prefix(':').ok_or_else(no_host)?)),
            }
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let name_char = |c: char| c.is_alphanumeric() || matches!(c, '-' | '.' | '_' | ':');
    if host.is_empty() || !host.chars().all(name_char) || (host.contains(':') && !authority.starts_with('[')) {
        return Err(no_host());
    }
    if let Some(port) = port.filter(|p| !p.is_empty())
        && !(port.len() <= 5
            && port.bytes().all(|b| b.is_ascii_digit())
            && (1..=65535).contains(&port.parse::<u32>().unwrap_or(0)))
    {
        return Err(ValidationError::new("url", "the port must be a number from 1 to 65535"));
    }
    // Last, the parser the sender uses (reqwest's): a host the checks above
    // pass can still be one it cannot read (`xn--zz`, not valid punycode),
    // and a URL accepted here must be one a delivery can be sent to.
    match url::Url::parse(url) {
        Ok(parsed) if parsed.host().is_some() => Ok(()),
        Ok(_) => Err(no_host()),
        Err(e) => Err(ValidationError::new("url", format!("is not a URL a delivery can be sent to ({e})"))),
    }
}

/// The event filter as stored: sorted, each type once.
pub fn normalize_events(events: &[EventKind]) -> Vec<EventKind> {
    let mut v = events.to_vec();
    v.sort();
    v.dedup();
    v
}

/// What follows attempt number `attempt` (1-based) that did not succeed:
/// wait `Some(delay)` and try again, or `None`: give up. The delay doubles
/// from one second, up to [`WEBHOOK_BACKOFF_MAX`]; attempt
/// [`WEBHOOK_MAX_ATTEMPTS`] is the last.
pub fn retry_delay(attempt: u32) -> Option<Duration> {
    if attempt >= WEBHOOK_MAX_ATTEMPTS {
        return None;
    }
    let secs = 1u64.checked_shl(attempt.saturating_sub(1)).unwrap_or(u64::MAX);
    Some(Duration::from_secs(secs).min(WEBHOOK_BACKOFF_MAX))
}

/// A receiver accepted a delivery iff it answered 2xx.
pub fn accepted(status: Option<u16>) -> bool {
    status.is_some_and(|s| (200..300).contains(&s))
}

/// The outcome of attempt `attempt` that got `status`, and when to retry.
pub fn after_attempt(attempt: u32, status: Option<u16>) -> (DeliveryOutcome, Option<Duration>) {
    if accepted(status) {
        return (DeliveryOutcome::Delivered, None);
    }
    match retry_delay(attempt) {
        Some(d) => (DeliveryOutcome::Retrying, Some(d)),
        None => (DeliveryOutcome::Failed, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_and_https_urls_with_a_host() {
        for ok in [
            "http://127.0.0.1:8080/hook",
            "https://example.com",
            "HTTPS://Example.com/a?b=c",
            "http://[::1]:65535/x",
            "http://[2001:db8::1]/",
            "http://my_host.example:1/",
            "http://bücher.example/",
        ] {
            assert!(validate_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ftp://example.com",
            "file:///etc/passwd",
            "javascript:alert(1)",
            "example.com/hook",
            "http://",
            "http:///path",
            "http://user:pw@example.com/",
            "http://exa mple.com/",
            "http://:18901/",
            "http://example.com:99999/",
            "http://example.com:0/",
            "http://example.com:80a/",
            "http://%zz/",
            // Names the sender's URL parser cannot turn into a host.
            "http://xn--zz/",
            "http://xn--a.example/",
            "https://xn--/",
            "http://exa%2fmple.com/",
            "http://[::1/",
            "http://[not-v6]/",
            "http://a:b:c/",
            "gopher://example.com/",
            "",
        ] {
            let e = validate_url(bad).unwrap_err();
            assert_eq!(e.field, "url", "{bad}");
        }
        let long = format!("https://example.com/{}", "a".repeat(WEBHOOK_URL_MAX));
        assert!(validate_url(&long).is_err());
    }

    #[test]
    fn backoff_doubles_is_capped_and_ends() {
        assert_eq!(retry_delay(1), Some(Duration::from_secs(1)));
        assert_eq!(retry_delay(2), Some(Duration::from_secs(2)));
        assert_eq!(retry_delay(5), Some(Duration::from_secs(16)));
        assert_eq!(retry_delay(14), Some(WEBHOOK_BACKOFF_MAX));
        assert_eq!(retry_delay(WEBHOOK_MAX_ATTEMPTS), None);
        assert_eq!(after_attempt(1, Some(204)), (DeliveryOutcome::Delivered, None));
        assert_eq!(after_attempt(1, Some(500)), (DeliveryOutcome::Retrying, Some(Duration::from_secs(1))));
        assert_eq!(after_attempt(1, None).0, DeliveryOutcome::Retrying);
        assert_eq!(after_attempt(WEBHOOK_MAX_ATTEMPTS, Some(301)).0, DeliveryOutcome::Failed);
    }
}
