//! What a run measured: one [`Row`] per measurement, rendered as a table or
//! serialized as JSON.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::Sizes;
use crate::fixture::{Backend, process_rss_mib};
use crate::latency::{Latency, Samples};

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub machine: Machine,
    pub sizes: Sizes,
    /// How to read `rss_mib`: the server runs inside the bench process.
    pub rss_note: &'static str,
    /// How pad and the peers connect to Postgres (`Fixture::tls`), when it ran.
    pub postgres_connections: Option<String>,
    pub rows: Vec<Row>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: Option<String>,
    pub load_average: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub backend: Backend,
    pub scenario: &'static str,
    /// The sizes of this measurement, e.g. `clients=64 items=1`.
    pub params: String,
    /// `http` (through the server), `store` (the `Store` trait in-process),
    /// `sql` (plain statements on the same tables), or a peer's name.
    pub via: String,
    pub ops: u64,
    pub seconds: f64,
    pub ops_per_sec: f64,
    pub latency: Option<Latency>,
    /// The process's resident set (server + load generator) and its peak so far.
    pub rss_mib: Option<f64>,
    pub peak_rss_mib: Option<f64>,
    /// Scenario-specific figures: conflict share, HTTP/store ratio, …
    pub note: String,
}

impl Row {
    pub fn new(backend: Backend, scenario: &'static str, params: String, via: impl Into<String>) -> Row {
        let rss = process_rss_mib();
        Row {
            backend,
            scenario,
            params,
            via: via.into(),
            ops: 0,
            seconds: 0.0,
            ops_per_sec: 0.0,
            latency: None,
            rss_mib: rss.map(|r| r.0),
            peak_rss_mib: rss.map(|r| r.1),
            note: String::new(),
        }
    }

    /// `ops` done in `elapsed`, with per-op latencies.
    pub fn measured(mut self, ops: u64, elapsed: Duration, samples: Samples) -> Row {
        self.ops = ops;
        self.seconds = elapsed.as_secs_f64();
        self.ops_per_sec = if self.seconds > 0.0 { ops as f64 / self.seconds } else { 0.0 };
        self.latency = samples.latency();
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Row {
        self.note = note.into();
        self
    }
}

impl Report {
    pub fn new(sizes: &Sizes) -> Report {
        Report {
            machine: Machine::this(),
            sizes: sizes.clone(),
            rss_note: "in-process server: rss_mib is the whole bench process (server + load generator + seeding)",
            postgres_connections: None,
            rows: Vec::new(),
        }
    }

    /// The rows as an aligned text table, with the machine on top.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let m = &self.machine;
        let _ = writeln!(
            out,
            "machine: {} cpus ({}), load {}",
            m.cpus,
            m.cpu_model.as_deref().unwrap_or("?"),
            m.load_average.as_deref().unwrap_or("?")
        );
        let _ = writeln!(out, "rss: {}", self.rss_note);
        if let Some(tls) = &self.postgres_connections {
            let _ = writeln!(out, "postgres connections (pad and every peer): {tls}");
        }
        let header =
            ["BACKEND", "SCENARIO", "PARAMS", "VIA", "OPS", "OPS/S", "P50 MS", "P99 MS", "MAX MS", "RSS MB", "NOTE"];
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                let lat = |f: fn(&Latency) -> f64| r.latency.as_ref().map_or("-".into(), |l| format!("{:.2}", f(l)));
                vec![
                    r.backend.name().into(),
                    r.scenario.into(),
                    r.params.clone(),
                    r.via.clone(),
                    r.ops.to_string(),
                    format!("{:.0}", r.ops_per_sec),
                    lat(|l| l.p50_ms),
                    lat(|l| l.p99_ms),
                    lat(|l| l.max_ms),
                    r.rss_mib.map_or("-".into(), |m| format!("{m:.0}")),
                    r.note.clone(),
                ]
            })
            .collect();
        let widths: Vec<usize> = (0..header.len())
            .map(|i| rows.iter().map(|r| r[i].len()).chain([header[i].len()]).max().unwrap_or(0))
            .collect();
        let mut line = |cells: &[String]| {
            let text: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
            let _ = writeln!(out, "{}", text.join("  ").trim_end());
        };
        line(&header.map(String::from));
        for r in &rows {
            line(r);
        }
        out
    }
}

impl Machine {
    fn this() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string());
        let load_average = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
        Machine { cpus: std::thread::available_parallelism().map_or(1, |n| n.get()), cpu_model, load_average }
    }
}
