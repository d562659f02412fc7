//! `/metrics` in the Prometheus text format (docs/operations.md, "Metrics").
//! Lease counters and histograms are labelled by workspace slug; a mutex
//! around a small map is enough at lease-call rates, so no registry crate.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Upper bounds of the request- and claim-latency buckets, in seconds.
const BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];
/// Upper bounds of the lease hold-time buckets, in seconds (1 s to 4 h).
const HOLD_BUCKETS: [f64; 11] = [1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 14400.0];

/// What happened to a lease, one counter each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseCount {
    Claim,
    Refresh,
    Conflict,
    Renewal,
    Release,
    Completion,
    Failure,
    Expiry,
    Quarantine,
    ClaimNextHit,
    ClaimNextMiss,
}

impl LeaseCount {
    pub const ALL: [LeaseCount; 11] = [
        LeaseCount::Claim,
        LeaseCount::Refresh,
        LeaseCount::Conflict,
        LeaseCount::Renewal,
        LeaseCount::Release,
        LeaseCount::Completion,
        LeaseCount::Failure,
        LeaseCount::Expiry,
        LeaseCount::Quarantine,
        LeaseCount::ClaimNextHit,
        LeaseCount::ClaimNextMiss,
    ];

    fn name_and_help(self) -> (&'static str, &'static str) {
        match self {
            LeaseCount::Claim => ("pad_lease_claims_total", "Leases granted (claim and claim-next)."),
            LeaseCount::Refresh => ("pad_lease_refreshes_total", "Claims that refreshed the caller's own lease."),
            LeaseCount::Conflict => {
                ("pad_lease_conflicts_total", "Lease requests refused with lease_held or lease_lost.")
            }
            LeaseCount::Renewal => ("pad_lease_renewals_total", "Leases renewed."),
            LeaseCount::Release => ("pad_lease_releases_total", "Leases released or broken."),
            LeaseCount::Completion => ("pad_lease_completions_total", "Leases ended by complete."),
            LeaseCount::Failure => ("pad_lease_failures_total", "Leases ended by fail."),
            LeaseCount::Expiry => ("pad_lease_expiries_total", "Expired leases recorded by this instance's observer."),
            LeaseCount::Quarantine => {
                ("pad_lease_quarantines_total", "Items labelled needs-human by a failure or an observed expiry.")
            }
            LeaseCount::ClaimNextHit => ("pad_claim_next_hits_total", "claim-next calls that granted an item."),
            LeaseCount::ClaimNextMiss => ("pad_claim_next_misses_total", "claim-next calls that found nothing ready."),
        }
    }
}

/// A histogram's cumulative bucket counts, sum and count.
#[derive(Default, Clone)]
struct Histogram {
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, bounds: &[f64], secs: f64) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; bounds.len()];
        }
        for (bound, bucket) in bounds.iter().zip(&mut self.buckets) {
            if secs <= *bound {
                *bucket += 1;
            }
        }
        self.sum += secs;
        self.count += 1;
    }

    /// Adds `other`'s observations to these (the `other` workspace series).
    fn add(&mut self, other: &Histogram) {
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
        self.sum += other.sum;
        self.count += other.count;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str, bounds: &[f64]) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (i, bound) in bounds.iter().enumerate() {
            let n = self.buckets.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {n}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", self.count);
        let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = writeln!(out, "{name}_sum{braces} {}\n{name}_count{braces} {}", self.sum, self.count);
    }
}

#[derive(Default, Clone)]
struct WorkspaceLeases {
    counts: [u64; LeaseCount::ALL.len()],
    hold: Histogram,
    claim_latency: Histogram,
    /// When this instance last recorded anything for the workspace.
    last_active: Option<Instant>,
}

impl WorkspaceLeases {
    /// Everything recorded for the workspace: what ranks it among the busiest.
    fn activity(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.hold.count + self.claim_latency.count
    }

    fn add(&mut self, other: &WorkspaceLeases) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.last_active = self.last_active.max(other.last_active);
        self.hold.add(&other.hold);
        self.claim_latency.add(&other.claim_latency);
    }
}

/// How many workspaces get series of their own: the busiest, by everything
/// recorded for them since the process started. The rest are summed into
/// `workspace="other"`, so a scrape stays small however many workspaces
/// there are (docs/operations.md, "Metrics").
pub const MAX_WORKSPACE_LABELS: usize = 50;
/// The most bytes a scrape may take before fewer workspaces are named:
/// the cap is also by size, since a slug may be 63 characters and each named
/// workspace repeats it on every series line (about 40). Measured on the
/// whole text, so a scrape stays under the 200 KB docs/operations.md
/// ("Metrics") states.
pub const SCRAPE_BYTES_MAX: usize = 190_000;
/// The label value of the series that sums the workspaces past
/// [`MAX_WORKSPACE_LABELS`].
pub const OTHER_WORKSPACES: &str = "other";
/// A workspace this instance recorded nothing for in this long is
/// forgotten: its figures move into `workspace="other"` for good and its
/// label is gone, so the label set does not only grow (docs/operations.md,
/// "Metrics").
pub const WORKSPACE_IDLE: Duration = Duration::from_secs(3600);

#[derive(Default)]
pub struct Metrics {
    leases: Mutex<Leases>,
    latency_buckets: [AtomicU64; BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_micros: AtomicU64,
    webhook_dropped: AtomicU64,
    /// Claim-nexts waiting for work now (long polls).
    waiting: AtomicU64,
}

/// Counts one waiting claim-next in `pad_claim_next_waiting` while it lives.
pub struct Waiting<'a>(&'a AtomicU64);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[derive(Default)]
struct Leases {
    by_workspace: BTreeMap<String, WorkspaceLeases>,
    /// The figures of forgotten workspaces, kept so `other`'s counters
    /// never go down.
    forgotten: WorkspaceLeases,
}

impl Leases {
    fn forget_idle(&mut self, now: Instant) {
        let idle: Vec<String> = self
            .by_workspace
            .iter()
            .filter(|(_, w)| w.last_active.is_none_or(|t| now.saturating_duration_since(t) >= WORKSPACE_IDLE))
            .map(|(ws, _)| ws.clone())
            .collect();
        for ws in idle {
            if let Some(w) = self.by_workspace.remove(&ws) {
                self.forgotten.add(&w);
            }
        }
    }
}

fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A label value escaped as the text format requires.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
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

    fn with(&self, ws: &str, f: impl FnOnce(&mut WorkspaceLeases)) {
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        let w = leases.by_workspace.entry(ws.to_string()).or_default();
        w.last_active = Some(Instant::now());
        f(w);
    }

    pub fn count(&self, ws: &str, what: LeaseCount) {
        self.with(ws, |w| w.counts[what as usize] += 1);
    }

    /// How long a lease was held, from its grant to its end.
    pub fn held(&self, ws: &str, held: chrono::Duration) {
        let secs = held.num_milliseconds().max(0) as f64 / 1000.0;
        self.with(ws, |w| w.hold.observe(&HOLD_BUCKETS, secs));
    }

    /// How long the store took to answer a claim or claim-next.
    pub fn claim_latency(&self, ws: &str, took: Duration) {
        self.with(ws, |w| w.claim_latency.observe(&BUCKETS, took.as_secs_f64()));
    }

    /// Marks a claim-next as waiting for work until the guard is dropped.
    pub fn waiting(&self) -> Waiting<'_> {
        inc(&self.waiting);
        Waiting(&self.waiting)
    }

    /// How many claim-nexts wait now.
    pub fn waiting_now(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Queued webhook deliveries this instance dropped at a full queue
    /// (docs/webhooks.md, "A full queue").
    pub fn webhook_deliveries_dropped(&self, n: u64) {
        self.webhook_dropped.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts a lease request the store refused as contention.
    pub fn refused(&self, ws: &str, e: &pad_store::StoreError) {
        if matches!(e, pad_store::StoreError::LeaseHeld { .. } | pad_store::StoreError::LeaseLost { .. }) {
            self.count(ws, LeaseCount::Conflict);
        }
    }

    /// The exposition; `live` is the store's live-lease count per workspace,
    /// `None` when it could not be read (the gauge is then left out).
    pub fn render(&self, live: Option<&[(String, u64)]>) -> String {
        self.render_at(live, Instant::now())
    }

    fn render_at(&self, live: Option<&[(String, u64)]>, now: Instant) -> String {
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        leases.forget_idle(now);
        let mut ranked: Vec<(String, WorkspaceLeases)> =
            leases.by_workspace.iter().map(|(ws, w)| (ws.clone(), w.clone())).collect();
        let forgotten = leases.forgotten.last_active.is_some().then(|| leases.forgotten.clone());
        drop(leases);
        ranked.sort_by(|a, b| b.1.activity().cmp(&a.1.activity()).then_with(|| a.0.cmp(&b.0)));
        // The busiest [`MAX_WORKSPACE_LABELS`], fewer while the scrape is
        // past [`SCRAPE_BYTES_MAX`]: measured on the text itself, so every
        // family counts, whatever its labels.
        let mut named = MAX_WORKSPACE_LABELS;
        loop {
            let out = self.render_named(&ranked, forgotten.as_ref(), live, named);
            if out.len() <= SCRAPE_BYTES_MAX || named == 0 {
                return out;
            }
            named = (named * SCRAPE_BYTES_MAX / out.len()).min(named - 1);
        }
    }

    /// The exposition with the first `named` of `ranked` named, the rest
    /// and the forgotten summed into `other`.
    fn render_named(
        &self, ranked: &[(String, WorkspaceLeases)], forgotten: Option<&WorkspaceLeases>,
        live: Option<&[(String, u64)]>, named: usize,
    ) -> String {
        let mut out = String::new();
        let mut shown: BTreeMap<String, WorkspaceLeases> = BTreeMap::new();
        for (i, (ws, w)) in ranked.iter().enumerate() {
            let key = if i < named { ws.as_str() } else { OTHER_WORKSPACES };
            shown.entry(key.to_string()).or_default().add(w);
        }
        if let Some(forgotten) = forgotten {
            shown.entry(OTHER_WORKSPACES.to_string()).or_default().add(forgotten);
        }
        for what in LeaseCount::ALL {
            let (name, help) = what.name_and_help();
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (ws, w) in &shown {
                let _ = writeln!(out, "{name}{{workspace=\"{}\"}} {}", label(ws), w.counts[what as usize]);
            }
        }
        if let Some(live) = live {
            let name = "pad_leases_live";
            let _ = writeln!(out, "# HELP {name} Unexpired leases in the store now.\n# TYPE {name} gauge");
            // Named as the counters are: the rest sum into `other`.
            let mut gauges: BTreeMap<&str, u64> = BTreeMap::new();
            for (ws, n) in live {
                let named = shown.contains_key(ws.as_str()) && ws != OTHER_WORKSPACES;
                *gauges.entry(if named { ws.as_str() } else { OTHER_WORKSPACES }).or_default() += n;
            }
            for (ws, n) in gauges {
                let _ = writeln!(out, "{name}{{workspace=\"{}\"}} {n}", label(ws));
            }
        }
        let name = "pad_lease_hold_seconds";
        let _ = writeln!(out, "# HELP {name} How long leases were held, grant to end.\n# TYPE {name} histogram");
        for (ws, w) in &shown {
            w.hold.render(&mut out, name, &format!("workspace=\"{}\"", label(ws)), &HOLD_BUCKETS);
        }
        let name = "pad_lease_claim_duration_seconds";
        let _ = writeln!(out, "# HELP {name} Store time of claim and claim-next calls.\n# TYPE {name} histogram");
        for (ws, w) in &shown {
            w.claim_latency.render(&mut out, name, &format!("workspace=\"{}\"", label(ws)), &BUCKETS);
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
        let name = "pad_claim_next_waiting";
        let _ = writeln!(out, "# HELP {name} Claim-next calls waiting for work now (long polls).\n# TYPE {name} gauge");
        let _ = writeln!(out, "{name} {}", self.waiting.load(Ordering::Relaxed));
        let name = "pad_webhook_deliveries_dropped_total";
        let _ = writeln!(
            out,
            "# HELP {name} Queued webhook deliveries dropped because their subscription's queue was full.\n\
             # TYPE {name} counter\n{name} {}",
            self.webhook_dropped.load(Ordering::Relaxed)
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_histograms_render_by_workspace() {
        let m = Metrics::default();
        m.count("acme", LeaseCount::Claim);
        m.count("acme", LeaseCount::Claim);
        m.count("b\"x", LeaseCount::Quarantine);
        m.held("acme", chrono::Duration::seconds(20));
        let text = m.render(Some(&[("acme".into(), 3)]));
        assert!(text.contains("pad_lease_claims_total{workspace=\"acme\"} 2\n"), "{text}");
        assert!(text.contains("pad_lease_quarantines_total{workspace=\"b\\\"x\"} 1\n"), "{text}");
        assert!(text.contains("pad_leases_live{workspace=\"acme\"} 3\n"), "{text}");
        assert!(text.contains("pad_lease_hold_seconds_bucket{workspace=\"acme\",le=\"15\"} 0\n"), "{text}");
        assert!(text.contains("pad_lease_hold_seconds_bucket{workspace=\"acme\",le=\"30\"} 1\n"), "{text}");
        assert!(text.contains("pad_lease_hold_seconds_sum{workspace=\"acme\"} 20\n"), "{text}");
        assert!(!m.render(None).contains("pad_leases_live{"), "no gauge when the store could not be read");
        assert!(text.contains("pad_webhook_deliveries_dropped_total 0\n"), "{text}");
        m.webhook_deliveries_dropped(7);
        assert!(m.render(None).contains("pad_webhook_deliveries_dropped_total 7\n"));
    }

    #[test]
    fn idle_workspaces_are_forgotten_into_other() {
        let m = Metrics::default();
        m.count("old", LeaseCount::Claim);
        m.count("old", LeaseCount::Claim);
        m.held("old", chrono::Duration::seconds(5));
        let later = Instant::now() + WORKSPACE_IDLE / 2;
        m.count("new", LeaseCount::Claim);
        let text = m.render_at(None, later);
        assert!(text.contains("pad_lease_claims_total{workspace=\"old\"} 2\n"), "not idle yet: {text}");
        // An hour after their last records, `old` and `new` are no labels at
        // all; their figures live on in `other`, so no counter goes down.
        let text = m.render_at(Some(&[("old".into(), 1)]), Instant::now() + WORKSPACE_IDLE + Duration::from_secs(1));
        assert!(!text.contains("workspace=\"old\""), "{text}");
        assert!(text.contains("pad_lease_claims_total{workspace=\"other\"} 3\n"), "{text}");
        assert!(text.contains("pad_lease_hold_seconds_count{workspace=\"other\"} 1\n"), "{text}");
        assert!(text.contains("pad_leases_live{workspace=\"other\"} 1\n"), "{text}");
        assert!(!text.contains("workspace=\"new\""), "{text}");
        assert!(m.leases.lock().unwrap().by_workspace.is_empty(), "forgotten workspaces hold no memory");
        // Activity brings a label back, counting afresh.
        m.count("old", LeaseCount::Claim);
        let text = m.render(None);
        assert!(text.contains("pad_lease_claims_total{workspace=\"old\"} 1\n"), "{text}");
        assert!(text.contains("pad_lease_claims_total{workspace=\"other\"} 3\n"), "{text}");
    }

    #[test]
    fn workspace_labels_are_capped_with_the_rest_summed_as_other() {
        let m = Metrics::default();
        let mut live = Vec::new();
        for i in 0..2000u64 {
            let ws = format!("workspace-with-a-long-slug-{i:04}");
            for _ in 0..=(i % 7) {
                m.count(&ws, LeaseCount::Claim);
            }
            m.held(&ws, chrono::Duration::seconds(5));
            m.claim_latency(&ws, Duration::from_millis(3));
            live.push((ws, 1));
        }
        // The busiest workspace is named.
        for _ in 0..100 {
            m.count("busy", LeaseCount::Claim);
        }
        let text = m.render(Some(&live));
        assert!(text.len() < 200_000, "{} bytes", text.len());
        assert!(text.contains("pad_lease_claims_total{workspace=\"busy\"} 100\n"), "the busiest keeps its label");
        let labels: std::collections::BTreeSet<&str> =
            text.lines().filter_map(|l| l.split("workspace=\"").nth(1)?.split('"').next()).collect();
        assert!(labels.len() <= MAX_WORKSPACE_LABELS + 1, "{} label values", labels.len());
        assert!(labels.contains(OTHER_WORKSPACES));
        // Nothing is lost: the sums over all series are the totals.
        let claims: u64 = text
            .lines()
            .filter(|l| l.starts_with("pad_lease_claims_total{"))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(claims, 100 + (0..2000u64).map(|i| i % 7 + 1).sum::<u64>());
        let live_total: u64 = text
            .lines()
            .filter(|l| l.starts_with("pad_leases_live{"))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(live_total, 2000);
        assert!(text.contains("pad_lease_hold_seconds_count{workspace=\"other\"}"), "histograms are summed too");
    }
}
