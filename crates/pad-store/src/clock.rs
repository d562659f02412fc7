//! The wall clock a backend reads when the store's clock is the server
//! process's (SQLite, docs/leases.md). Production reads the system clock; a
//! test may hand the store a clock it moves forward
//! (`pad-test-support`'s `TestClock`), so expiry tests need not sleep.

/// Microseconds since the Unix epoch.
pub trait Wall: Send + Sync + 'static {
    fn micros(&self) -> i64;
}

/// The system clock.
pub struct SystemWall;

impl Wall for SystemWall {
    fn micros(&self) -> i64 {
        chrono::Utc::now().timestamp_micros()
    }
}
