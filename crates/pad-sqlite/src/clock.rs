//! The store's clock. With SQLite the server process is the only writer, so
//! its clock is the store's (docs/leases.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use pad_core::Timestamp;
use pad_store::clock::{SystemWall, Wall};

pub struct Clock {
    last: AtomicI64,
    wall: Arc<dyn Wall>,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new(Arc::new(SystemWall))
    }
}

impl Clock {
    pub fn new(wall: Arc<dyn Wall>) -> Self {
        Clock { last: AtomicI64::new(0), wall }
    }

    /// The time of a write: strictly after every earlier write's, even if the
    /// system clock stalls or steps back, so `updated_at` always moves on.
    pub fn tick(&self) -> Timestamp {
        let mut prev = self.last.load(Ordering::Relaxed);
        loop {
            let next = self.wall.micros().max(prev + 1);
            match self.last.compare_exchange_weak(prev, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return to_ts(next),
                Err(p) => prev = p,
            }
        }
    }

    /// The time of a read: never before the last write.
    pub fn read(&self) -> Timestamp {
        to_ts(self.wall.micros().max(self.last.load(Ordering::Acquire)))
    }
}

fn to_ts(micros: i64) -> Timestamp {
    Timestamp::from_timestamp_micros(micros).expect("the system clock is within chrono's range")
}

#[cfg(test)]
mod tests {
    #[test]
    fn ticks_strictly_increase() {
        let c = super::Clock::default();
        let mut last = c.tick();
        for _ in 0..10_000 {
            let t = c.tick();
            assert!(t > last);
            last = t;
        }
        assert!(c.read() >= last);
    }
}
