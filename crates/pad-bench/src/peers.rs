//! Peer job queues on the same Postgres, same job and worker counts as pad's
//! drain: each is a small script under `bench/peers/` that enqueues N jobs
//! (untimed), starts W workers, times until all N are complete, and prints
//! one JSON line `{"jobs", "seconds", "version", "tuning"}`. It marks the
//! timed window with the lines `started` and `finished`, at which the CPU
//! time of the script and of PostgreSQL is read, as pad's drain reports
//! its own (docs/benchmarks.md, "CPU per item"). A peer that is not
//! installed or fails becomes a row saying so, not an error.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::cpu::PeerCpu;
use crate::fixture::Fixture;
use crate::{Result, Row, Samples, Sizes, progress};

/// One peer run may take this long before it is stopped.
const PEER_TIMEOUT: Duration = Duration::from_secs(300);

struct Peer {
    name: &'static str,
    /// The interpreter, relative to the peers dir when it is installed there.
    runtime: Runtime,
    script: &'static str,
    /// First the peer's per-job default, then its batched / fastest mode.
    modes: &'static [&'static str],
}

enum Runtime {
    Node,
    Python,
}

const PEERS: &[Peer] = &[
    Peer { name: "pg-boss", runtime: Runtime::Node, script: "pgboss.mjs", modes: &["per-job", "batch"] },
    Peer {
        name: "graphile-worker",
        runtime: Runtime::Node,
        script: "graphile.mjs",
        modes: &["per-job", "local-queue"],
    },
    Peer { name: "pgqueuer", runtime: Runtime::Python, script: "pgqueuer_drain.py", modes: &["per-job", "batch"] },
];

#[derive(Debug, Deserialize)]
struct Answer {
    jobs: u64,
    seconds: f64,
    version: String,
    tuning: String,
    /// The CPU note of the timed window, read by `pad bench`.
    #[serde(skip)]
    cpu: String,
}

/// `pad_drain` are this run's drain rows, to put pad's figure beside each peer's.
pub async fn run(fx: &Fixture, s: &Sizes, dir: &Path, pad_drain: &[Row]) -> Result<Vec<Row>> {
    let url = fx.database_url.as_deref().ok_or("peers need the Postgres backend")?;
    // Absolute, as each script runs with the peers dir as its working directory.
    let dir = &std::path::absolute(dir)?;
    let mut rows = Vec::new();
    for &w in &s.drain_workers {
        let pad = pad_drain
            .iter()
            .find(|r| {
                r.backend == fx.backend && r.scenario == "drain" && r.params.starts_with(&format!("workers={w} "))
            })
            .map(|r| r.ops_per_sec);
        for peer in PEERS {
            for mode in peer.modes {
                progress(&format!("peer {} ({mode}) with {w} workers", peer.name));
                let schema = format!("peer_{}_{}_{w}", peer.name.replace('-', "_"), mode.replace('-', "_"));
                let row = Row::new(fx.backend, "drain", format!("workers={w} items={}", s.drain_items), peer.name);
                let row = match run_one(dir, peer, mode, url, &schema, w, s.drain_items).await {
                    Ok(a) => {
                        let mut row = row.measured(a.jobs, Duration::from_secs_f64(a.seconds), Samples::default());
                        let vs = pad.map_or(String::new(), |p| {
                            format!(
                                "; pad {p:.0}/s = {:.2}x",
                                if row.ops_per_sec > 0.0 { p / row.ops_per_sec } else { 0.0 }
                            )
                        });
                        row.note = format!("{} {mode}: {}; {}{vs}", a.version, a.tuning, a.cpu);
                        row
                    }
                    Err(e) => row.note(format!("{mode}: not run: {e}")),
                };
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

async fn run_one(dir: &Path, peer: &Peer, mode: &str, url: &str, schema: &str, w: usize, n: u64) -> Result<Answer> {
    let script = dir.join(peer.script);
    if !script.exists() {
        return Err(format!("{} is missing", script.display()).into());
    }
    let runtime: PathBuf = match peer.runtime {
        Runtime::Node => dir.join("node_modules/.bin/node"),
        Runtime::Python => dir.join(".venv/bin/python"),
    };
    if !runtime.exists() {
        let how = match peer.runtime {
            Runtime::Node => "run `npm install` there",
            Runtime::Python => "run `python3 -m venv .venv && .venv/bin/pip install -r requirements.txt` there",
        };
        return Err(format!("{} is missing: {how}", runtime.display()).into());
    }
    let mut child = tokio::process::Command::new(&runtime)
        .arg(&script)
        .current_dir(dir)
        .env("PEER_DATABASE_URL", url)
        .env("PEER_SCHEMA", schema)
        .env("PEER_WORKERS", w.to_string())
        .env("PEER_JOBS", n.to_string())
        .env("PEER_MODE", mode)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().ok_or("the peer exited at once")?;
    let (stdout, mut stderr) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
    let ran = async {
        // Read while the script runs, so a full stderr pipe never stalls it.
        let errors = tokio::spawn(async move {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text).await;
            text
        });
        let (mut json, mut window) = (None, (None, None));
        let mut lines = BufReader::new(stdout).lines();
        while let Some(line) = lines.next_line().await? {
            match line.trim() {
                "started" => window.0 = Some(PeerCpu::of(pid)),
                "finished" => window.1 = Some(PeerCpu::of(pid)),
                l if l.starts_with('{') => json = Some(l.to_string()),
                _ => {}
            }
        }
        let status = child.wait().await?;
        Ok::<_, std::io::Error>((status, json, window, errors.await.unwrap_or_default()))
    };
    let (status, json, window, errors) = tokio::time::timeout(PEER_TIMEOUT, ran)
        .await
        .map_err(|_| format!("timed out after {}s", PEER_TIMEOUT.as_secs()))??;
    if !status.success() {
        let last = errors.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("{} exited {status}: {last}", peer.script).into());
    }
    let mut answer: Answer = serde_json::from_str(&json.ok_or("no JSON line on stdout")?)?;
    if answer.jobs != n {
        return Err(format!("completed {} of {n} jobs", answer.jobs).into());
    }
    answer.cpu = match window {
        (Some(start), Some(end)) => end.per_job_since(start, n),
        _ => "cpu not measured: the script marked no window".into(),
    };
    Ok(answer)
}
