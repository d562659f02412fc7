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
