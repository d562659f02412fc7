//! `/metrics` in the Prometheus text format. A handful of counters and one
//! latency histogram: a few atomics, no registry needed.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the request-latency buckets, in seconds.
const BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];

#[derive(Default)]
pub struct Metrics {
    pub claims: AtomicU64,
    pub refreshes: AtomicU64,
    pub conflicts: AtomicU64,
    pub renewals: AtomicU64,
    pub releases: AtomicU64,
    pub expiries: AtomicU64,
    pub claim_next_hits: AtomicU64,
    pub claim_next_misses: AtomicU64,
    latency_buckets: [AtomicU64; BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_micros: AtomicU64,
}

pub fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl Metrics {
    pub fn observe_request(&self, took: Duration) {
        let secs = took.as_secs_f64();
        for (bound, bucket) in BUCKETS.iter().zip(&self.latency_buckets) {
            if secs <= *bound {
                inc(bucket);
            }
        }
        inc(&self.latency_count);
        self.latency_sum_micros.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    /// Counts a lease request the store refused as contention.
    pub fn refused(&self, e: &pad_store::StoreError) {
        if matches!(e, pad_store::StoreError::LeaseHeld { .. } | pad_store::StoreError::LeaseLost { .. }) {
            inc(&self.conflicts);
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let counters = [
            ("pad_lease_claims_total", "Leases granted.", &self.claims),
            ("pad_lease_refreshes_total", "Claims that refreshed the caller's own lease.", &self.refreshes),
            ("pad_lease_conflicts_total", "Lease requests refused with lease_held or lease_lost.", &self.conflicts),
            ("pad_lease_renewals_total", "Leases renewed.", &self.renewals),
            ("pad_lease_releases_total", "Leases released or broken.", &self.releases),
            ("pad_lease_expiries_total", "Expired leases observed by this instance's timer.", &self.expiries),
            ("pad_claim_next_hits_total", "claim-next calls that granted an item.", &self.claim_next_hits),
            ("pad_claim_next_misses_total", "claim-next calls that found nothing ready.", &self.claim_next_misses),
        ];
        for (name, help, value) in counters {
            let _ =
                writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", value.load(Ordering::Relaxed));
        }
        let name = "pad_http_request_duration_seconds";
        let _ = writeln!(out, "# HELP {name} HTTP request latency.\n# TYPE {name} histogram");
        for (bound, bucket) in BUCKETS.iter().zip(&self.latency_buckets) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {}", bucket.load(Ordering::Relaxed));
        }
        let count = self.latency_count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.latency_sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
        out
    }
}
