//! Bounds on what one token may hold open.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Open SSE streams per token.
pub const STREAMS_PER_TOKEN: usize = 8;

#[derive(Default, Clone)]
pub struct StreamLimiter {
    open: Arc<Mutex<HashMap<String, usize>>>,
}

/// Held by a stream while it is open; closing the stream frees the slot.
pub struct StreamPermit {
    open: Arc<Mutex<HashMap<String, usize>>>,
    key: String,
}

impl StreamLimiter {
    pub fn open(&self, token_hash: &str) -> Option<StreamPermit> {
        let mut open = self.open.lock().expect("stream limiter lock");
        let n = open.entry(token_hash.to_string()).or_default();
        if *n >= STREAMS_PER_TOKEN {
            return None;
        }
        *n += 1;
        Some(StreamPermit { open: self.open.clone(), key: token_hash.to_string() })
    }
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut open = self.open.lock().expect("stream limiter lock");
        if let Some(n) = open.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// Per-token request rate: a token bucket of `burst` requests refilled at
/// `per_second`. `PAD_RATE_LIMIT` sets it (`500`, meaning 500/s with a
/// burst of twice that, or `off`); the default is generous enough for a
/// fleet sharing one token and still stops a runaway loop.
#[derive(Clone)]
pub struct RateLimiter {
    limit: Option<(f64, f64)>,
    buckets: Arc<Mutex<HashMap<String, (f64, std::time::Instant)>>>,
}

pub const DEFAULT_RATE_PER_SECOND: f64 = 5000.0;

impl RateLimiter {
    pub fn new(per_second: Option<f64>) -> Self {
        RateLimiter { limit: per_second.map(|r| (r, r * 2.0)), buckets: Default::default() }
    }

    pub fn from_env() -> Self {
        match std::env::var("PAD_RATE_LIMIT").ok().as_deref().map(str::trim) {
            Some("off" | "0") => Self::new(None),
            Some(v) => match v.parse::<f64>() {
                Ok(r) if r > 0.0 => Self::new(Some(r)),
                _ => {
                    tracing::warn!(value = v, "PAD_RATE_LIMIT is not a number or `off`; using the default");
                    Self::new(Some(DEFAULT_RATE_PER_SECOND))
                }
            },
            None => Self::new(Some(DEFAULT_RATE_PER_SECOND)),
        }
    }

    /// Takes one request from `key`'s bucket, or says how many seconds until one is free.
    pub fn check(&self, key: &str) -> Result<(), u64> {
        let Some((rate, burst)) = self.limit else { return Ok(()) };
        let now = std::time::Instant::now();
        let mut buckets = self.buckets.lock().expect("rate limiter lock");
        let (tokens, last) = buckets.entry(key.to_string()).or_insert((burst, now));
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * rate).min(burst);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - *tokens) / rate).ceil().max(1.0) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_refuses_with_a_wait() {
        let r = RateLimiter::new(Some(1.0));
        assert!(r.check("a").is_ok());
        assert!(r.check("a").is_ok());
        assert_eq!(r.check("a"), Err(1));
        assert!(r.check("b").is_ok(), "buckets are per key");
        assert!(RateLimiter::new(None).check("a").is_ok());
    }

    #[test]
    fn streams_are_bounded_per_token() {
        let l = StreamLimiter::default();
        let held: Vec<_> = (0..STREAMS_PER_TOKEN).map(|_| l.open("t").unwrap()).collect();
        assert!(l.open("t").is_none());
        assert!(l.open("u").is_some());
        drop(held);
        assert!(l.open("t").is_some());
    }
}
