//! `pad bench`: measures pad on a fresh store behind its own in-process
//! server on loopback, beside the same operations through the store with no
//! HTTP, plain SQL on the same tables, and (on Postgres) peer job queues.
//!
//! One module per scenario under [`scenarios`]; each returns [`Row`]s. The
//! shared pieces are [`latency::Samples`] (per-worker latencies, merged and
//! sorted once), [`fixture::Fixture`] (store + server + seeding) and
//! [`workers`] (spawn N tasks, collect what each measured).

pub mod cpu;
pub mod drain_floor;
pub mod fixture;
pub mod floor;
pub mod http_floor;
pub mod latency;
pub mod peers;
pub mod report;
pub mod scenarios;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

pub use fixture::{Backend, Fixture};
pub use latency::{Latency, Samples};
pub use report::{Report, Row};

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// C clients race on M items: claims/s, conflict share
    Contended,
    /// claim + release on distinct items: HTTP, the store in-process, plain SQL
    Cycle,
    /// the cycle's HTTP load through 1, then 3 server instances on one database (Postgres)
    Instances,
    /// live leases renewed by R workers
    Heartbeat,
    /// W workers drain a backlog with claim-next, then complete
    Drain,
    /// one supervisor with 8 jobs drains a backlog, claiming its free slots at once
    DrainBatched,
    /// pad's work with nothing around it: SQLite, the cycle against a minimal HTTP server;
    /// Postgres, the drain with the least SQL the contract's writes need
    Floor,
    /// an idle long-polling worker takes each new item: creation-to-grant latency
    Pickup,
    /// claim latency with few and with many items in the store
    Scale,
    /// pg-boss, graphile-worker and pgqueuer draining the same backlog (Postgres, --peers)
    Peers,
    /// item creation beside 20 dead webhook receivers with a queued backlog
    Webhooks,
}

/// `pad bench`'s flags. Sizes left out take the defaults (or `--quick`'s).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Options {
    /// Tiny sizes: checks the harness works, measures nothing worth reading
    #[arg(long)]
    pub quick: bool,
    /// Only these scenarios (comma-separated or repeated) [default: all but peers; peers with --peers]
    #[arg(long = "scenario", value_enum, value_delimiter = ',', value_name = "NAME")]
    pub scenarios: Vec<Scenario>,
    /// Also benchmark PostgreSQL: a fresh database is created on this server and dropped afterwards
    // Never echo it: a Postgres URL carries a password.
    #[arg(long, value_name = "URL")]
    pub database_url: Option<String>,
    /// Leave SQLite out (with --database-url: Postgres only)
    #[arg(long)]
    pub no_sqlite: bool,
    /// Concurrent clients for contended claim and the claim+release cycle [default: 64]
    #[arg(long, value_name = "C")]
    pub clients: Option<usize>,
    /// Items the contended clients race on [default: 1,100]
    #[arg(long, value_delimiter = ',', value_name = "M,…")]
    pub items: Vec<u64>,
    /// Drain worker counts [default: 1,8,32]
    #[arg(long, value_delimiter = ',', value_name = "W,…")]
    pub workers: Vec<usize>,
    /// Backlog size of each drain, pad's and the peers' [default: 10000]
    #[arg(long, value_name = "N")]
    pub drain_items: Option<u64>,
    /// Live leases the heartbeat scenario keeps renewing [default: 10000]
    #[arg(long, value_name = "N")]
    pub leases: Option<u64>,
    /// Heartbeat workers [default: 8]
    #[arg(long, value_name = "R")]
    pub renewers: Option<usize>,
    /// Store sizes of the scale scenario [default: 1000,1000000]
    #[arg(long, value_delimiter = ',', value_name = "N,…")]
    pub scale_items: Vec<u64>,
    /// Length of each timed measurement [default: 5]
    #[arg(long, value_name = "SECONDS")]
    pub seconds: Option<f64>,
    /// Run the peer queues (needs --database-url and `npm install` / a venv in --peers-dir)
    #[arg(long)]
    pub peers: bool,
    /// Where the peer scripts and their installs live
    #[arg(long, default_value = "bench/peers", value_name = "DIR")]
    pub peers_dir: PathBuf,
}

/// Every size of a run, with defaults applied.
#[derive(Debug, Clone, Serialize)]
pub struct Sizes {
    pub clients: usize,
    pub contended_items: Vec<u64>,
    pub drain_workers: Vec<usize>,
    pub drain_items: u64,
    pub leases: u64,
    pub renewers: usize,
    pub scale_items: Vec<u64>,
    pub seconds: f64,
    /// Sequential samples per store size in the scale scenario.
    pub scale_samples: usize,
    /// Items created one at a time for an idle long-polling worker.
    pub pickup_rounds: u64,
    /// Webhook deliveries queued behind the dead receivers.
    pub webhook_queued: u64,
}

impl Sizes {
    pub fn of(o: &Options) -> Sizes {
        let or = |given: &[u64], quick: &[u64], full: &[u64]| -> Vec<u64> {
            if !given.is_empty() {
                given.to_vec()
            } else if o.quick {
                quick.to_vec()
            } else {
                full.to_vec()
            }
        };
        let pick = |quick: u64, full: u64| if o.quick { quick } else { full };
        Sizes {
            clients: o.clients.unwrap_or(pick(4, 64) as usize),
            contended_items: or(&o.items, &[1, 3], &[1, 100]),
            drain_workers: if !o.workers.is_empty() {
                o.workers.clone()
            } else if o.quick {
                vec![1, 2]
            } else {
                vec![1, 8, 32]
            },
            drain_items: o.drain_items.unwrap_or(pick(40, 10_000)),
            leases: o.leases.unwrap_or(pick(40, 10_000)),
            renewers: o.renewers.unwrap_or(pick(2, 8) as usize),
            scale_items: or(&o.scale_items, &[100, 1_000], &[1_000, 1_000_000]),
            seconds: o.seconds.unwrap_or(if o.quick { 0.2 } else { 5.0 }),
            scale_samples: pick(20, 2_000) as usize,
            pickup_rounds: pick(5, 200),
            webhook_queued: pick(2_000, 80_000),
        }
    }

    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.seconds)
    }
}

/// Runs the selected scenarios on every selected backend and returns the rows.
pub async fn run(o: &Options) -> Result<Report> {
    let sizes = Sizes::of(o);
    let mut scenarios = o.scenarios.clone();
    if scenarios.is_empty() {
        scenarios = vec![
            Scenario::Contended,
            Scenario::Cycle,
            Scenario::Floor,
            Scenario::Instances,
            Scenario::Heartbeat,
            Scenario::Drain,
            Scenario::DrainBatched,
            Scenario::Pickup,
            Scenario::Scale,
            Scenario::Webhooks,
        ];
        if o.peers {
            scenarios.push(Scenario::Peers);
        }
    }
    scenarios.sort();
    scenarios.dedup();
    let mut report = Report::new(&sizes);
    let mut backends = Vec::new();
    if !o.no_sqlite {
        backends.push(Backend::Sqlite);
    }
    match &o.database_url {
        Some(_) => backends.push(Backend::Postgres),
        None if o.no_sqlite => return Err("--no-sqlite leaves no backend without --database-url".into()),
        None => {}
    }
    for backend in backends {
        let fx = match backend {
            Backend::Sqlite => Fixture::sqlite().await?,
            Backend::Postgres => Fixture::postgres(o.database_url.as_deref().expect("checked above")).await?,
        };
        if fx.tls.is_some() {
            report.postgres_connections = fx.tls.clone();
        }
        let result = run_on(&fx, &scenarios, &sizes, o, &mut report).await;
        fx.finish().await?;
        result?;
    }
    Ok(report)
}

async fn run_on(fx: &Fixture, scenarios: &[Scenario], sizes: &Sizes, o: &Options, report: &mut Report) -> Result<()> {
    for s in scenarios {
        progress(&format!("{} {s:?}", fx.backend.name()));
        let rows = match s {
            Scenario::Contended => scenarios::contended::run(fx, sizes).await?,
            Scenario::Cycle => scenarios::cycle::run(fx, sizes).await?,
            Scenario::Floor => scenarios::floor::run(fx, sizes, &report.rows).await?,
            Scenario::Instances if fx.backend == Backend::Postgres => scenarios::instances::run(fx, sizes).await?,
            Scenario::Instances => continue,
            Scenario::Heartbeat => scenarios::heartbeat::run(fx, sizes).await?,
            Scenario::Drain => scenarios::drain::run(fx, sizes).await?,
            Scenario::DrainBatched => scenarios::batch::run(fx, sizes).await?,
            Scenario::Pickup => scenarios::pickup::run(fx, sizes).await?,
            Scenario::Scale => scenarios::scale::run(fx, sizes).await?,
            Scenario::Webhooks => scenarios::webhooks::run(fx, sizes).await?,
            Scenario::Peers if fx.backend == Backend::Postgres => {
                peers::run(fx, sizes, &o.peers_dir, &report.rows).await?
            }
            Scenario::Peers => continue,
        };
        report.rows.extend(rows);
    }
    Ok(())
}

/// One line on stderr per step, so a long run shows where it is.
pub fn progress(what: &str) {
    eprintln!("pad bench: {what}");
}

/// The name of the load generator's threads, by which [`cpu::Cpu`] tells
/// their CPU time from the in-process server's.
pub const LOAD_THREAD: &str = "pad-load";

/// The load generator's own runtime: its threads are named [`LOAD_THREAD`],
/// while the server runs on the runtime `pad bench` started with, so a
/// row can report `pad serve`'s CPU apart from the load's (docs/benchmarks.md,
/// "CPU per item"). Two workers, as many as the machine has cores.
fn load_runtime() -> &'static tokio::runtime::Runtime {
    static LOAD: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    LOAD.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(LOAD_THREAD)
            .enable_all()
            .build()
            .expect("the load generator's runtime starts")
    })
}

/// Runs `fut` on the load generator's runtime ([`load_runtime`]) and waits
/// for it: what it spawns runs there too, and connections it opens are
/// driven there.
pub async fn on_load<T, Fut>(fut: Fut) -> Result<T>
where
    Fut: Future<Output = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    load_runtime().spawn(fut).await?
}

/// Spawns `n` workers, `f(i)` for each, on the load generator's runtime,
/// and collects what each returns.
pub async fn workers<T, F, Fut>(n: usize, f: F) -> Result<Vec<T>>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = (0..n).map(|i| load_runtime().spawn(f(i))).collect();
    let mut out = Vec::with_capacity(n);
    for h in handles {
        out.push(h.await??);
    }
    Ok(out)
}

/// A shared stopping time for duration-bound workers.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(Instant);

impl Deadline {
    pub fn after(d: Duration) -> Self {
        Deadline(Instant::now() + d)
    }

    pub fn passed(self) -> bool {
        Instant::now() >= self.0
    }
}

/// A cheap deterministic spread over `0..n` (no RNG dependency needed).
pub fn spread(seed: u64, n: u64) -> u64 {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(0x2545_F491_4F6C_DD1D);
    x ^= x >> 33;
    x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x ^= x >> 33;
    x % n.max(1)
}
