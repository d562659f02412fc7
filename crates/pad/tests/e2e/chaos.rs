//! Chaos for `pad drain` (docs/leases.md, S1 and L14): three drains over 30
//! items — some succeed, some hang, some always fail, some fail once — with
//! a drain supervisor `kill -9`ed at random and restarted for 30 s, against
//! a real `pad serve`. The worker writes a ledger (ref, epoch, pid, time); a
//! monitor thread reads it and /proc every few milliseconds.
//!
//! The drains run as the README's cron recipe does, without `--autonomous`:
//! `--max-attempts` alone keeps them off quarantined items. One of them runs
//! `--jobs 3`, so a `kill -9` there leaves three jobs' groups to their guards.
//!
//! Asserted: never two live worker processes (of different leases) on one
//! item; no worker process left at the end, nor any process in a worker's
//! process group (read from /proc); every worker stopped within
//! `--timeout` + `--kill-after` + slack; succeeding items `done`; always-
//! failing items quarantined after exactly `--max-attempts` failures; lease
//! claims ≤ runs + kills (no churn).

use crate::common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::pg::{ScratchDb, psql};
use common::server::TestServer;
use pad_client::{Client, Url};
use serde_json::Value;

const WS: &str = "default";
const DRAINS: usize = 3;
/// `--jobs` of each drain, by slot.
const JOBS: [usize; DRAINS] = [3, 1, 1];
const CHAOS: Duration = Duration::from_secs(30);
/// After the chaos, how long the drains may take to finish the backlog.
const SETTLE: Duration = Duration::from_secs(120);
const TIMEOUT_S: u64 = 2;
const KILL_AFTER_S: u64 = 1;
const TTL_S: u64 = 4;
const MAX_ATTEMPTS: i64 = 3;
/// How far past timeout + kill-after a worker may be seen alive: a safety
/// net, not the proof. Hung workers would sleep 1000 s, so being gone at all
/// shows pad stopped them; a loaded machine sees them go late (the longest
/// life is printed).
const SLACK: Duration = Duration::from_secs(10);

/// One of these runs at a time: each keeps three drains busy.
static SERIAL: Mutex<()> = Mutex::new(());

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Succeed,
    FailOnce,
    AlwaysFail,
    Hang,
    /// Hangs and ignores SIGTERM: only SIGKILL stops it.
    HangStubborn,
}

const PLAN: [(Kind, usize); 5] =
    [(Kind::Succeed, 12), (Kind::FailOnce, 8), (Kind::AlwaysFail, 6), (Kind::Hang, 2), (Kind::HangStubborn, 2)];

/// The worker: records itself in the ledger, starts a grandchild (the part
/// that must not outlive the lease either), and exits as its item's kind says.
const WORKER: &str = r#"#!/bin/sh
dir=$1
read kind secs < "$dir/kind/$PAD_REF"
now() { date +%s.%N; }
[ "$kind" = hang-stubborn ] && trap '' TERM
echo "start $PAD_REF $PAD_LEASE_EPOCH $$ $(now)" >> "$dir/ledger"
code=0
case $kind in
  fail) code=1 ;;
  fail-once) if [ ! -e "$dir/failed/$PAD_REF" ]; then : > "$dir/failed/$PAD_REF"; code=1; fi ;;
esac
sleep "$secs" &
echo "child $PAD_REF $PAD_LEASE_EPOCH $! $(now)" >> "$dir/ledger"
wait $!
echo "end $PAD_REF $PAD_LEASE_EPOCH $$ $(now) $code" >> "$dir/ledger"
exit $code
"#;

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// Whether `pid` runs, as the worker of (`item`, `epoch`): its environment
/// says so, which also rules out a recycled pid.
fn runs_as(pid: u32, item: &str, epoch: &str) -> bool {
    let live = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])));
    live && std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
        let env = String::from_utf8_lossy(&env);
        env.split('\0').any(|v| v == format!("PAD_REF={item}"))
            && env.split('\0').any(|v| v == format!("PAD_LEASE_EPOCH={epoch}"))
    })
}

/// A worker process from the ledger and what the monitor saw of it.
#[derive(Debug, Clone)]
struct Proc {
    item: String,
    epoch: String,
    started: f64,
    /// When the monitor first saw it gone.
    gone: Option<f64>,
}

#[derive(Default)]
struct Watch {
    procs: BTreeMap<u32, Proc>,
    /// (item, live epochs, when) whenever two leases' workers lived at once.
    overlaps: Vec<(String, Vec<String>, f64)>,
}

/// Reads the ledger and /proc until `stop`, recording overlaps and deaths.
fn monitor(ledger: PathBuf, watch: Arc<Mutex<Watch>>, stop: Arc<AtomicBool>) {
    loop {
        let last_round = stop.load(Ordering::SeqCst);
        let text = std::fs::read_to_string(&ledger).unwrap_or_default();
        let mut w = watch.lock().unwrap();
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if let ["start" | "child", item, epoch, pid, at] = f[..]
                && let (Ok(pid), Ok(at)) = (pid.parse(), at.parse())
            {
                w.procs.entry(pid).or_insert_with(|| Proc {
                    item: item.into(),
                    epoch: epoch.into(),
                    started: at,
                    gone: None,
                });
            }
        }
        let now = unix_now();
        let mut live: HashMap<String, HashSet<String>> = HashMap::new();
        let pids: Vec<u32> = w.procs.iter().filter(|(_, p)| p.gone.is_none()).map(|(pid, _)| *pid).collect();
        for pid in pids {
            let p = w.procs.get_mut(&pid).unwrap();
            if runs_as(pid, &p.item, &p.epoch) {
                live.entry(p.item.clone()).or_default().insert(p.epoch.clone());
            } else {
                p.gone = Some(now);
            }
        }
        for (item, epochs) in live {
            if epochs.len() > 1 {
                w.overlaps.push((item, epochs.into_iter().collect(), now));
            }
        }
        drop(w);
        if last_round {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pids of the ledger's `what` lines.
fn ledger_pids(ledger: &Path, what: &str) -> HashSet<u32> {
    let text = std::fs::read_to_string(ledger).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first() == Some(&what)).then(|| f.get(3)?.parse().ok())?
        })
        .collect()
}

/// Live processes whose process group is one of `groups` (field 5 of
/// /proc/PID/stat, after the parenthesised command name).
fn processes_in(groups: &HashSet<u32>) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let live = f.first().is_some_and(|state| !state.starts_with(['Z', 'X']));
        if live && f.get(2).and_then(|g| g.parse().ok()).is_some_and(|g: u32| groups.contains(&g)) {
            found.push(pid);
        }
    }
    found
}

fn drain(s: &TestServer, dir: &Path, slot: usize, worker: &Path) -> Child {
    let (ttl, timeout, kill_after) = (format!("{TTL_S}s"), format!("{TIMEOUT_S}s"), format!("{KILL_AFTER_S}s"));
    let log =
        std::fs::OpenOptions::new().create(true).append(true).open(dir.join(format!("drain-{slot}.log"))).unwrap();
    s.pad()
        .args(["drain", "--done-on-success", "--holder", &format!("drain-{slot}")])
        .args(["--ttl", &ttl, "--timeout", &timeout, "--kill-after", &kill_after])
        .args(["--max-attempts", &MAX_ATTEMPTS.to_string(), "--jobs", &JOBS[slot].to_string()])
        .args(["--format", "json", "--"])
        .arg("sh")
        .arg(worker)
        .arg(dir)
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap()
}

fn show(s: &TestServer, r: &str) -> Value {
    let out = s.pad_output(["item", "show", r, "--format", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn settled(item: &Value, kind: Kind) -> bool {
    let quarantined = item["labels"].as_array().is_some_and(|l| l.contains(&"needs-human".into()));
    match kind {
        Kind::Succeed | Kind::FailOnce => item["status"] == "done",
        _ => quarantined && item.get("lease").is_none(),
    }
}

fn chaos(s: &TestServer, configure: impl Fn(&str)) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Quick retries (L14 backoff 1 s, 2 s) so an item fails three times within
    // the test; expiries from our own kills must not quarantine anything
    // (L13), the failures alone do. There is no API for these settings.
    configure(
        "UPDATE workspaces SET retry_backoff_base_seconds = 1, retry_backoff_max_seconds = 2, \
         quarantine_after_expiries = 0",
    );
    let dir = s.home.join("chaos");
    for sub in ["kind", "failed"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let worker = dir.join("work.sh");
    std::fs::write(&worker, WORKER).unwrap();

    let c = Client::new(Url::parse(&s.url).unwrap(), s.token.clone()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut items: Vec<(String, Kind)> = Vec::new();
    for (kind, n) in PLAN {
        for i in 0..n {
            let title = format!("{kind:?} {i}");
            let item = rt.block_on(c.create_item(WS, &pad_core::NewItem { title, ..Default::default() })).unwrap();
            let r = item.item_ref.to_string();
            let (name, secs) = match kind {
                Kind::Succeed => ("succeed", format!("0.{}", 2 + i % 6)),
                Kind::FailOnce => ("fail-once", "0.3".into()),
                Kind::AlwaysFail => ("fail", "0.2".into()),
                Kind::Hang => ("hang", "1000".into()),
                Kind::HangStubborn => ("hang-stubborn", "1000".into()),
            };
            std::fs::write(dir.join("kind").join(&r), format!("{name} {secs}\n")).unwrap();
            items.push((r, kind));
        }
    }
    assert!(items.len() >= 30);

    let watch = Arc::new(Mutex::new(Watch::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let monitor = {
        let (ledger, watch, stop) = (dir.join("ledger"), watch.clone(), stop.clone());
        std::thread::spawn(move || monitor(ledger, watch, stop))
    };

    let start = Instant::now();
    let mut drains: Vec<Child> = (0..DRAINS).map(|i| drain(s, &dir, i, &worker)).collect();
    let mut kills = 0u32;
    let mut lost_grants = 0usize;
    let mut restarts = 0u32;
    let mut next_kill = start + Duration::from_millis(800);
    let all_settled = || items.iter().all(|(r, k)| settled(&show(s, r), *k));
    loop {
        let chaos_on = start.elapsed() < CHAOS;
        if !chaos_on && all_settled() {
            break;
        }
        assert!(start.elapsed() < CHAOS + SETTLE, "the backlog did not settle within {:?}", CHAOS + SETTLE);
        if chaos_on && Instant::now() >= next_kill {
            let slot = rand::random_range(0..DRAINS);
            drains[slot].kill().unwrap(); // SIGKILL
            drains[slot].wait().unwrap();
            kills += 1;
            // Each of the drain's jobs may have held a lease it had not used yet.
            lost_grants += JOBS[slot];
            drains[slot] = drain(s, &dir, slot, &worker);
            next_kill = Instant::now() + Duration::from_millis(rand::random_range(700..2200));
        }
        for (slot, d) in drains.iter_mut().enumerate() {
            if let Some(status) = d.try_wait().unwrap() {
                // Nothing ready (the rest is leased or backing off): a drain
                // exits 0, as cron would see it; start the next one.
                assert_eq!(status.code(), Some(0), "drain-{slot} failed; see {}", dir.display());
                restarts += 1;
                *d = drain(s, &dir, slot, &worker);
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let chaos_for = start.elapsed();
    // The backlog is settled: the last drains find nothing and exit.
    for d in &mut drains {
        let limit = Instant::now() + Duration::from_secs(15);
        while d.try_wait().unwrap().is_none() {
            assert!(Instant::now() < limit, "a drain did not finish");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::SeqCst);
    monitor.join().unwrap();
    let w = watch.lock().unwrap();
    eprintln!("chaos: {chaos_for:?}, {kills} kill -9, {restarts} restarts, {} worker processes", w.procs.len());

    assert!(chaos_for >= CHAOS && kills >= 10, "chaos for {chaos_for:?} with {kills} kills");
    assert!(w.overlaps.is_empty(), "two leases' workers alive on one item: {:?}", w.overlaps);
    let left: Vec<_> = w.procs.iter().filter(|(_, p)| p.gone.is_none()).collect();
    assert!(left.is_empty(), "worker processes left at the end: {left:?}");
    // Each worker (`sh`, CMD itself) led its job's process group: nothing
    // it started may be left in one either.
    let groups: HashSet<u32> = ledger_pids(&dir.join("ledger"), "start");
    let in_groups = processes_in(&groups);
    assert!(in_groups.is_empty(), "processes left in workers' groups: {in_groups:?}");
    let limit = Duration::from_secs(TIMEOUT_S + KILL_AFTER_S) + SLACK;
    let mut longest = 0.0_f64;
    for (pid, p) in w.procs.iter() {
        let lived = p.gone.unwrap() - p.started;
        longest = longest.max(lived);
        assert!(lived <= limit.as_secs_f64(), "worker {pid} of {} lived {lived:.2}s > {limit:?}", p.item);
    }
    eprintln!(
        "chaos: the longest-lived worker lived {longest:.2}s (timeout {TIMEOUT_S}s + kill-after {KILL_AFTER_S}s)"
    );

    let ledger = std::fs::read_to_string(dir.join("ledger")).unwrap();
    let runs = ledger.lines().filter(|l| l.starts_with("start ")).count();
    let mut failures_seen: HashMap<&str, usize> = HashMap::new();
    for line in ledger.lines().filter(|l| l.starts_with("end ")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f[5] != "0" {
            *failures_seen.entry(f[1]).or_default() += 1;
        }
    }
    for (r, kind) in &items {
        let item = show(s, r);
        assert!(settled(&item, *kind), "{r} ({kind:?}) did not end as it should: {item}");
        if matches!(kind, Kind::AlwaysFail | Kind::Hang | Kind::HangStubborn) {
            assert_eq!(item["failures"].as_i64(), Some(MAX_ATTEMPTS), "{r} ({kind:?}): {item}");
            assert_eq!(item["status"], "open", "{r}");
        }
        if *kind == Kind::AlwaysFail {
            // At least the three failures the server counted really ran (a
            // kill between CMD's exit and the fail request adds one more).
            let seen = failures_seen.get(r.as_str()).copied().unwrap_or(0);
            assert!(seen >= MAX_ATTEMPTS as usize, "{r}: {seen} failing runs");
        }
    }

    // A fresh client: the first one's pooled connection has idled out.
    let c = Client::new(Url::parse(&s.url).unwrap(), s.token.clone()).unwrap();
    let mut claims = 0usize;
    let mut after = 0;
    loop {
        let page = rt.block_on(c.events(WS, after, 500)).unwrap();
        let Some(last) = page.last() else { break };
        after = last.id;
        claims += page.iter().filter(|e| e.kind == pad_core::EventKind::LeaseClaimed).count();
    }
    eprintln!("chaos: {claims} claims, {runs} runs, {kills} kills ({lost_grants} jobs killed)");
    assert!(claims <= runs + lost_grants, "churn: {claims} claims > {runs} runs + {lost_grants} jobs killed");
}

#[test]
fn chaos_drains_under_kill_9_on_sqlite() {
    let s = TestServer::start();
    let db = s.home.join("pad.db");
    chaos(&s, |sql| {
        // The server writes too (the expiry observer, every second): wait
        // for its lock as pad's own connections do, instead of failing at once.
        let out = std::process::Command::new("sqlite3")
            .args(["-cmd", ".timeout 5000"])
            .arg(&db)
            .arg(sql)
            .output()
            .expect("sqlite3 is needed");
        assert!(out.status.success(), "sqlite3: {}", String::from_utf8_lossy(&out.stderr));
    });
}

#[test]
fn chaos_drains_under_kill_9_on_postgres() {
    let Some(db) = ScratchDb::create_blocking() else {
        eprintln!("SKIPPED: set PAD_TEST_DATABASE_URL=postgres://… to run the drain chaos test on Postgres");
        return;
    };
    let s = TestServer::start_with_db(&db.url);
    chaos(&s, |sql| {
        psql(&db.url, sql);
    });
}
