//! Latency recording shared by every scenario: each worker keeps its own
//! [`Samples`] (no locking on the hot path), merged once at the end into a
//! [`Summary`] by sorting. Exact percentiles, no histogram buckets.

use std::time::{Duration, Instant};

use serde::Serialize;

/// Raw latencies of one worker, in microseconds.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    micros: Vec<u64>,
}

impl Samples {
    pub fn record(&mut self, d: Duration) {
        self.micros.push(u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    }

    /// Runs `f`, records how long it took, and hands back its answer.
    pub async fn time<T>(&mut self, f: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let out = f.await;
        self.record(started.elapsed());
        out
    }

    pub fn len(&self) -> usize {
        self.micros.len()
    }

    pub fn is_empty(&self) -> bool {
        self.micros.is_empty()
    }

    pub fn merge(all: impl IntoIterator<Item = Samples>) -> Samples {
        Samples { micros: all.into_iter().flat_map(|s| s.micros).collect() }
    }

    /// One percentile (`q` in 0..=1) by nearest rank, in milliseconds.
    pub fn percentile(&self, q: f64) -> Option<f64> {
        let mut sorted = self.micros.clone();
        sorted.sort_unstable();
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
        sorted.get(rank - 1).map(|&m| ms(m))
    }

    /// Percentiles by nearest rank; `None` when nothing was recorded.
    pub fn latency(mut self) -> Option<Latency> {
        if self.micros.is_empty() {
            return None;
        }
        self.micros.sort_unstable();
        let at = |q: f64| {
            let rank = ((q * self.micros.len() as f64).ceil() as usize).clamp(1, self.micros.len());
            ms(self.micros[rank - 1])
        };
        Some(Latency { p50_ms: at(0.50), p99_ms: at(0.99), max_ms: ms(*self.micros.last().expect("not empty")) })
    }
}

fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

/// Latency of one operation, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut s = Samples::default();
        for us in 1..=100 {
            s.record(Duration::from_micros(us * 1000));
        }
        let l = s.latency().unwrap();
        assert_eq!((l.p50_ms, l.p99_ms, l.max_ms), (50.0, 99.0, 100.0));
        assert_eq!(Samples::default().latency(), None);
    }
}
