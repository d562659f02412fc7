//! A store clock a test moves forward, so a lease "expires" without the
//! test sleeping through its TTL.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use pad_store::clock::Wall;

/// The system clock plus an offset that only grows.
#[derive(Default)]
pub struct TestClock {
    offset: AtomicI64,
}

impl TestClock {
    pub fn advance(&self, by: Duration) {
        let micros = i64::try_from(by.as_micros()).expect("a test advances by less than 292k years");
        self.offset.fetch_add(micros, Ordering::AcqRel);
    }
}

impl Wall for TestClock {
    fn micros(&self) -> i64 {
        chrono::Utc::now().timestamp_micros() + self.offset.load(Ordering::Acquire)
    }
}
