//! A server that goes away for a while (docs/leases.md, "`--follow`: as
//! work arrives" and "Draining"): which failures pass by waiting, and the
//! pauses between tries. A `--follow` drain's claims and every job's record
//! of how it ended are tried again by these rules; the heartbeat tells a
//! renewal that got no answer from one refused by the same [`passes`].

use std::time::Duration;

use pad_client::ClientError;

use crate::error::{Code, Exit};

/// Whether a failed request is worth another try: no answer (refused,
/// reset, timed out, a gateway with nothing behind it), `unavailable` or
/// `rate_limited` — README's exit 8. Anything else (a bad token, a workspace
/// gone, a refused filter, a lease no longer ours) will not pass by waiting.
pub(crate) fn passes(e: &ClientError) -> bool {
    Code::of(e).exit() == Exit::Unavailable
}

/// The pauses between the tries of a request that fails for a reason that
/// passes (a `--follow` drain's claim, a job's end): doubling from [`Backoff::FIRST`] to at most
/// [`Backoff::MAX`], or what the server's `Retry-After` asks if longer. No
/// clock: the caller sleeps the pause it is given.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    /// The failures in a row so far.
    failures: u32,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(500);
    /// A server back up is found within this long, however long it was down.
    const MAX: Duration = Duration::from_secs(30);

    pub(crate) fn failing(&self) -> bool {
        self.failures > 0
    }

    /// One more failure: how long to pause before the next try.
    pub(crate) fn failed(&mut self, retry_after: Option<Duration>) -> Duration {
        let doubled = Self::FIRST.saturating_mul(1 << self.failures.min(16));
        self.failures = self.failures.saturating_add(1);
        doubled.min(Self::MAX).max(retry_after.unwrap_or_default())
    }

    /// A try got through: whether it had been failing until now.
    pub(crate) fn recovered(&mut self) -> bool {
        std::mem::take(&mut self.failures) > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_to_a_cap_honour_retry_after_and_start_over_on_success() {
        let mut b = Backoff::default();
        assert!(!b.failing());
        let pauses: Vec<f64> = (0..9).map(|_| b.failed(None).as_secs_f64()).collect();
        assert_eq!(pauses, [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]);
        assert!(b.failing());
        assert!(b.recovered());
        assert!(!b.recovered(), "said once");
        assert_eq!(b.failed(Some(Duration::from_secs(7))), Duration::from_secs(7), "the server's word, if longer");
        assert_eq!(b.failed(Some(Duration::from_millis(10))), Duration::from_secs(1));
        for _ in 0..100 {
            assert!(b.failed(None) <= Backoff::MAX);
        }
    }

    #[test]
    fn only_what_waiting_can_mend_passes() {
        use pad_core::api::ErrorCode;
        let api = |status, code| ClientError::Api {
            status,
            code,
            message: String::new(),
            details: serde_json::Value::Null,
            retry_after: None,
        };
        assert!(passes(&ClientError::Unavailable("connection refused".into())));
        assert!(passes(&api(503, ErrorCode::Unavailable)));
        assert!(passes(&api(429, ErrorCode::RateLimited)));
        for (status, code) in [
            (401, ErrorCode::Unauthorized),
            (403, ErrorCode::Forbidden),
            (404, ErrorCode::NotFound),
            (400, ErrorCode::ValidationFailed),
            (500, ErrorCode::InternalError),
        ] {
            assert!(!passes(&api(status, code)), "{code:?}");
        }
        assert!(!passes(&ClientError::Protocol("HTTP 418".into())));
    }
}
