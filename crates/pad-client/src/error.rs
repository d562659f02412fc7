//! The one error type of the client: the server's refusal (with its stable
//! code, typed), a server that could not be reached, or an answer that made
//! no sense. What a code means to a user (an exit code, a sentence) is the
//! caller's: the CLI's `exit.rs` holds README's exit-code table.

use pad_core::Lease;
use pad_core::api::{ErrorCode, ErrorEnvelope};
use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with its `{"error": {...}}` envelope.
    #[error("{message}")]
    Api {
        status: u16,
        code: ErrorCode,
        message: String,
        details: serde_json::Value,
        /// Seconds, from `Retry-After` (`lease_held`, `rate_limited`).
        retry_after: Option<u64>,
    },
    /// No answer: connection refused, reset, timed out, or a gateway saying
    /// the server behind it is down.
    #[error("server unavailable: {0}")]
    Unavailable(String),
    /// An answer that is not what the API promises.
    #[error("unexpected answer from the server: {0}")]
    Protocol(String),
}

/// The live lease a `lease_held` refusal names (docs/leases.md L2): the
/// shape the server writes, defined once in pad-core.
pub use pad_core::api::LeaseHeldDetails as HeldLease;

impl ClientError {
    /// How long the server asked the caller to wait before trying again
    /// (`Retry-After` of `rate_limited` and `lease_held`; docs/api.md, Limits).
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            ClientError::Api { retry_after, .. } => retry_after.map(std::time::Duration::from_secs),
            _ => None,
        }
    }

    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the refusal is of an end's `next` alone (a field inside it,
    /// or `next` itself on a server without it): the end was not made, and
    /// made without `next` it may be taken (docs/api.md, "The next item in
    /// the same call").
    pub fn refuses_next(&self) -> bool {
        self.refused_field().is_some_and(|f| f == "next" || f.starts_with("next."))
    }

    /// The field a refusal of the request (a 4xx) names, if it names one.
    pub fn refused_field(&self) -> Option<&str> {
        let ClientError::Api { status: 400..=499, details, .. } = self else { return None };
        details.get("field").and_then(|f| f.as_str())
    }

    /// The holder of the lease that refused a claim, renew or release.
    pub fn held_lease(&self) -> Option<HeldLease> {
        match self {
            ClientError::Api { code: ErrorCode::LeaseHeld, details, .. } => HeldLease::deserialize(details).ok(),
            _ => None,
        }
    }

    /// For `lease_lost`: the lease that is live now, if any (`Some(None)`
    /// means the lease simply expired and nobody holds the item).
    pub fn current_lease(&self) -> Option<Option<Lease>> {
        match self {
            ClientError::Api { code: ErrorCode::LeaseLost, details, .. } => {
                Option::<Lease>::deserialize(details.get("current").unwrap_or(&serde_json::Value::Null)).ok()
            }
            _ => None,
        }
    }

    /// For `lease_lost`: the caller's own lease as it ended, when the server
    /// knows it: `ended: broken` with the owner's `reason` and `broken_by`
    /// (docs/leases.md L7).
    pub fn ended_lease(&self) -> Option<pad_core::lease::LastLease> {
        match self {
            ClientError::Api { code: ErrorCode::LeaseLost, details, .. } => {
                details.get("ended").and_then(|e| pad_core::lease::LastLease::deserialize(e).ok())
            }
            _ => None,
        }
    }

    /// The error for a non-2xx answer with this status and body.
    pub(crate) fn from_answer(status: u16, retry_after: Option<u64>, body: &[u8]) -> Self {
        if let Ok(ErrorEnvelope { error }) = serde_json::from_slice::<ErrorEnvelope>(body) {
            return ClientError::Api {
                status,
                code: error.code,
                message: error.message,
                details: error.details,
                retry_after,
            };
        }
        // A proxy or load balancer in front of a server that is down answers
        // with its own page, not our envelope.
        if matches!(status, 502..=504) {
            return ClientError::Unavailable(format!("HTTP {status} from a gateway"));
        }
        ClientError::Protocol(format!("HTTP {status} without an error envelope: {}", snippet(body)))
    }

    /// A failure before any answer arrived.
    pub(crate) fn from_transport(e: reqwest::Error) -> Self {
        if e.is_builder() || e.is_decode() || e.is_redirect() {
            ClientError::Protocol(chain(&e))
        } else if e.is_connect() {
            // Nothing listens (or the host is unknown): the innermost cause
            // says which; the layers above it only repeat "connect error".
            ClientError::Unavailable(root_cause(&e))
        } else {
            ClientError::Unavailable(chain(&e))
        }
    }
}

impl ClientError {
    /// A failure while reading a body that had started to arrive. reqwest
    /// calls a connection cut mid-body a decode error; for a stream it is
    /// the server going away.
    pub(crate) fn from_body(e: reqwest::Error) -> Self {
        ClientError::Unavailable(chain(&e))
    }
}

/// reqwest's own message is "error sending request"; the cause (refused,
/// timed out, reset) is further down the chain.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// The innermost error's message, e.g. "Connection refused (os error 111)".
fn root_cause(e: &dyn std::error::Error) -> String {
    let mut last = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        last = s.to_string();
        source = s.source();
    }
    last
}

pub(crate) fn snippet(body: &[u8]) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None if text.is_empty() => "(empty body)".to_string(),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(status: u16, retry_after: Option<u64>, body: serde_json::Value) -> ClientError {
        ClientError::from_answer(status, retry_after, body.to_string().as_bytes())
    }

    #[test]
    fn envelope_becomes_api_error_with_its_code() {
        let e = answer(404, None, json!({"error": {"code": "not_found", "message": "no item TASK-9"}}));
        assert!(
            matches!(&e, ClientError::Api { status: 404, code: ErrorCode::NotFound, message, .. } if message == "no item TASK-9")
        );
        assert_eq!(e.code(), Some(ErrorCode::NotFound));
        assert_eq!(e.to_string(), "no item TASK-9");
    }

    #[test]
    fn lease_held_details_are_typed() {
        let e = answer(
            409,
            Some(840),
            json!({"error": {"code": "lease_held", "message": "leased", "details": {
                "holder": "runner-a", "session_id": null, "epoch": 3,
                "acquired_at": "2026-01-01T00:00:00Z", "renewed_at": "2026-01-01T00:00:00Z",
                "expires_at": "2026-01-01T00:15:00Z", "expires_in_seconds": 840
            }}}),
        );
        assert_eq!(e.code(), Some(ErrorCode::LeaseHeld));
        assert!(matches!(e, ClientError::Api { retry_after: Some(840), .. }));
        assert_eq!(e.retry_after(), Some(std::time::Duration::from_secs(840)));
        let held = e.held_lease().unwrap();
        assert_eq!((held.holder.as_str(), held.epoch, held.expires_in_seconds), ("runner-a", 3, 840));
        assert_eq!(e.current_lease(), None);
    }

    #[test]
    fn lease_lost_carries_the_current_lease_or_none() {
        let e = answer(
            409,
            None,
            json!({"error": {"code": "lease_lost", "message": "lost", "details": {"current": null}}}),
        );
        assert_eq!(e.current_lease(), Some(None));
        let e = answer(
            409,
            None,
            json!({"error": {"code": "lease_lost", "message": "lost", "details": {"current": {
                "holder": "runner-b", "session_id": "s", "epoch": 4, "lease_id": 9, "ttl_seconds": 60,
                "acquired_at": "2026-01-01T00:00:00Z", "renewed_at": "2026-01-01T00:00:00Z",
                "expires_at": "2026-01-01T00:01:00Z"
            }}}}),
        );
        assert_eq!(e.current_lease().unwrap().unwrap().holder, "runner-b");
    }

    #[test]
    fn answers_without_an_envelope() {
        let e = ClientError::from_answer(502, None, b"<html>Bad Gateway</html>");
        assert!(matches!(e, ClientError::Unavailable(_)));
        let e = ClientError::from_answer(500, None, b"");
        assert!(matches!(&e, ClientError::Protocol(m) if m.contains("(empty body)")));
    }

    #[test]
    fn snippet_is_bounded() {
        let long = "x".repeat(1000);
        assert_eq!(snippet(long.as_bytes()).chars().count(), 201);
    }
}
