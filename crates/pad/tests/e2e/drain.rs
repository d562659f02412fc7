//! "Drain a backlog", end to end: real `pad serve` and `pad` processes.
//! claim-next under contention (L11), `pad run` keeping and losing a lease,
//! fencing (L10), quarantine (L13) and `pad drain`.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use common::cli::{code, create, show, stderr, stdout, wait_for};
use common::recorder::Recorder;
use common::server::TestServer;
use pad_client::{Client, Url};
use pad_core::api::ClaimNextBody;
use pad_core::{FrontierFilter, NewItem};
use serde_json::Value;

const WS: &str = "default";

fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap().block_on(f)
}

fn client(s: &TestServer) -> Client {
    Client::new(Url::parse(&s.url).unwrap(), s.token.clone()).unwrap()
}

/// Creates `n` items over HTTP (1 000 CLI processes would take a while).
async fn create_items(c: &Client, n: usize) -> Vec<String> {
    let mut refs = Vec::with_capacity(n);
    for i in 0..n {
        let item = c.create_item(WS, &NewItem { title: format!("item {i}"), ..NewItem::default() }).await.unwrap();
        refs.push(item.item_ref.to_string());
    }
    refs
}

fn expires_at(lease: &Value) -> DateTime<Utc> {
    lease["expires_at"].as_str().unwrap().parse().unwrap()
}

fn spawn_run(s: &TestServer, args: &[&str]) -> Child {
    s.pad().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

// --- L11: claim-next under contention -----------------------------------------

const ITEMS: usize = 1000;
const HTTP_CALLERS: usize = 12;
const CLI_CALLERS: usize = 4;

/// 16 callers drain 1 000 items: 12 pad-client tasks and 4 threads each
/// running `pad item claim-next` processes in a loop until exit 5. Every
/// item must be granted exactly once, and every caller must get some.
fn claim_next_contention(s: &TestServer) {
    let c = client(s);
    let started = Instant::now();
    let refs = block_on(create_items(&c, ITEMS));
    eprintln!("created {ITEMS} items in {:?}", started.elapsed());
    let started = Instant::now();

    let cli: Vec<_> = (0..CLI_CALLERS)
        .map(|i| {
            let mut cmd = s.pad();
            cmd.args(["item", "claim-next", "--holder", &format!("cli-{i}"), "--format", "json"]);
            std::thread::spawn(move || {
                let mut got = Vec::new();
                loop {
                    let out = cmd.output().unwrap();
                    match code(&out) {
                        0 => {
                            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                            got.push(v["item"]["ref"].as_str().unwrap().to_string());
                        }
                        5 => return got,
                        other => panic!("claim-next exited {other}: {}", stderr(&out)),
                    }
                }
            })
        })
        .collect();
    let http: Vec<(String, Vec<String>)> = block_on(async {
        let tasks: Vec<_> = (0..HTTP_CALLERS)
            .map(|i| {
                let c = c.clone();
                tokio::spawn(async move {
                    let holder = format!("http-{i}");
                    let body = ClaimNextBody {
                        filter: FrontierFilter::default(),
                        holder: Some(holder.clone()),
                        ..ClaimNextBody::default()
                    };
                    let mut got = Vec::new();
                    while let Some(item) = c.claim_next(WS, &body).await.unwrap().item {
                        got.push(item.item_ref.to_string());
                    }
                    (holder, got)
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.push(t.await.unwrap());
        }
        all
    });
    let mut per_caller: Vec<(String, Vec<String>)> = http;
    for (i, t) in cli.into_iter().enumerate() {
        per_caller.push((format!("cli-{i}"), t.join().unwrap()));
    }
    eprintln!("claimed {ITEMS} items with 16 callers in {:?}", started.elapsed());

    let mut granted: HashMap<&str, &str> = HashMap::new();
    for (holder, got) in &per_caller {
        assert!(!got.is_empty(), "{holder} was starved");
        for r in got {
            if let Some(first) = granted.insert(r, holder) {
                panic!("{r} granted twice: to {first} and {holder}");
            }
        }
    }
    let counts: Vec<usize> = per_caller.iter().map(|(_, g)| g.len()).collect();
    eprintln!("grants per caller: {counts:?}");
    assert_eq!(granted.len(), ITEMS);
    assert_eq!(granted.keys().copied().collect::<HashSet<_>>(), refs.iter().map(String::as_str).collect());
}

#[test]
fn claim_next_grants_each_item_once_across_16_callers() {
    claim_next_contention(&TestServer::start());
}

/// The same over Postgres, on a fresh database, when
/// `PAD_TEST_DATABASE_URL` names a server (`postgres://user:pw@host/db`).
#[test]
fn claim_next_grants_each_item_once_across_16_callers_on_postgres() {
    // Dropped after the server (declared first), like every scratch database.
    let Some(db) = common::pg::ScratchDb::create_blocking() else {
        eprintln!("SKIPPED: set PAD_TEST_DATABASE_URL=postgres://… to run claim-next contention on Postgres");
        return;
    };
    let server = TestServer::start_with_db(&db.url);
    claim_next_contention(&server);
    drop(server);
}

// --- pad run -------------------------------------------------------------------

#[test]
fn run_keeps_the_lease_alive_and_releases_it_at_exit() {
    let s = TestServer::start();
    let r = create(&s, "long job");
    let env_file = s.home.join("env.txt");
    let script =
        format!("echo \"$PAD_REF $PAD_LEASE_EPOCH $PAD_HOLDER $PAD_SESSION_ID\" > {}; sleep 10", env_file.display());
    let mut run = spawn_run(
        &s,
        &["run", &r, "--holder", "runner-a", "--ttl", "6s", "--kill-after", "1s", "--", "sh", "-c", &script],
    );

    wait_for("the lease", Duration::from_secs(30), || show(&s, &r).get("lease").is_some());
    let first = show(&s, &r)["lease"].clone();
    let mut last_expiry = expires_at(&first);
    // When a look last found the lease live: it must be past the first
    // lease's expiry, whatever the number of looks a loaded machine makes.
    let mut last_seen_live = Utc::now();
    while run.try_wait().unwrap().is_none() {
        let asked = Utc::now();
        let item = show(&s, &r);
        if run.try_wait().unwrap().is_some() {
            break; // released between the two looks
        }
        let lease = item.get("lease").unwrap_or_else(|| panic!("lease gone while CMD runs: {item}"));
        assert_eq!((lease["epoch"].as_i64(), lease["holder"].as_str()), (Some(1), Some("runner-a")), "{lease}");
        assert!(expires_at(lease) >= last_expiry);
        last_expiry = expires_at(lease);
        last_seen_live = asked;
        std::thread::sleep(Duration::from_secs(1));
    }
    let out = run.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(last_seen_live > expires_at(&first), "the lease was seen live after its first expiry");
    assert!(last_expiry > expires_at(&first) + chrono::Duration::seconds(5), "renewals moved the expiry on");
    assert!(show(&s, &r).get("lease").is_none(), "released at exit");

    let env = std::fs::read_to_string(&env_file).unwrap();
    let fields: Vec<&str> = env.split_whitespace().collect();
    assert_eq!(&fields[..3], [r.as_str(), "1", "runner-a"]);
    assert_eq!(fields.get(3).map(|s| s.len()), Some(16), "a generated session id: {env}");
    assert_eq!(first["session_id"].as_str(), fields.get(3).copied());
}

#[test]
fn a_killed_run_frees_the_item_when_its_lease_expires() {
    let s = TestServer::start();
    let r = create(&s, "crashy job");
    let mut run =
        spawn_run(&s, &["run", &r, "--holder", "runner-a", "--ttl", "6s", "--kill-after", "1s", "--", "sleep", "5"]);
    wait_for("the lease", Duration::from_secs(30), || show(&s, &r).get("lease").is_some());
    run.kill().unwrap(); // SIGKILL: no release, no more renewals
    run.wait().unwrap();
    let lease = show(&s, &r)["lease"].clone();
    let expiry = expires_at(&lease);
    // The lease ends one TTL after its last renewal, which came before the kill.
    let renewed: DateTime<Utc> = lease["renewed_at"].as_str().unwrap().parse().unwrap();
    assert_eq!(expiry - renewed, chrono::Duration::seconds(6), "the lease outlives its TTL: {lease}");

    let early = s.pad_output(["item", "claim", &r, "--holder", "runner-b"]);
    assert_eq!(code(&early), 7, "claimed before expiry: {}", stdout(&early));
    assert!(stderr(&early).contains("leased by runner-a"), "{}", stderr(&early));

    let wait = (expiry - Utc::now()).to_std().unwrap_or_default() + Duration::from_millis(300);
    std::thread::sleep(wait);
    let late = s.pad_output(["item", "claim", &r, "--holder", "runner-b"]);
    assert_eq!(code(&late), 0, "{}", stderr(&late));
    assert!(stdout(&late).contains("runner-b, epoch 2"), "{}", stdout(&late));
}

#[test]
fn a_broken_lease_stops_the_child_and_run_exits_7() {
    let s = TestServer::start();
    let r = create(&s, "stuck job");
    let flag = s.home.join("term.txt");
    let script = format!("trap \"echo got-term > {}; exit 0\" TERM; while true; do sleep 0.1; done", flag.display());
    let run = spawn_run(
        &s,
        &["run", &r, "--holder", "runner-a", "--ttl", "6s", "--kill-after", "1s", "--", "sh", "-c", &script],
    );
    wait_for("the lease", Duration::from_secs(30), || show(&s, &r).get("lease").is_some());

    let broke = s.pad_output(["item", "release", &r, "--force", "--reason", "stuck for hours"]);
    assert!(stdout(&broke).contains("Lease broken"), "{}{}", stdout(&broke), stderr(&broke));
    let broken_at = Instant::now();
    let out = run.wait_with_output().unwrap();
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    // CMD loops for ever: only the heartbeat's renewal noticing the break
    // stops it (the time is printed, not bounded).
    eprintln!("the break was noticed {:?} after it", broken_at.elapsed());
    assert!(stderr(&out).contains("lost") && stderr(&out).contains(": stuck for hours;"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&flag).unwrap().trim(), "got-term");
}

#[test]
fn ctrl_c_reaches_the_child_and_the_lease_is_released() {
    let s = TestServer::start();
    let r = create(&s, "interruptible");
    let flag = s.home.join("int.txt");
    let script = format!("trap \"echo got-int > {}; exit 130\" INT; while true; do sleep 0.1; done", flag.display());
    let run = spawn_run(&s, &["run", &r, "--ttl", "1m", "--done-on-success", "--", "sh", "-c", &script]);
    wait_for("the lease", Duration::from_secs(30), || show(&s, &r).get("lease").is_some());
    signal(&run, "INT");
    let out = run.wait_with_output().unwrap();
    assert_eq!(code(&out), 130, "the child's code: {}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&flag).unwrap().trim(), "got-int");
    let item = show(&s, &r);
    assert!(item.get("lease").is_none(), "released: {item}");
    assert_eq!(item["status"], "open");
}

fn signal(child: &Child, sig: &str) {
    let ok = std::process::Command::new("kill").args([&format!("-{sig}"), &child.id().to_string()]).status().unwrap();
    assert!(ok.success());
}

#[test]
fn run_reports_a_lost_race_and_a_missing_command() {
    let s = TestServer::start();
    let r = create(&s, "taken");
    let claim = s.pad_output(["item", "claim", &r, "--holder", "runner-a"]);
    assert!(claim.status.success());
    let out = s.pad_output(["run", &r, "--holder", "runner-b", "--", "true"]);
    assert_eq!(code(&out), 7);
    assert!(stderr(&out).contains("leased by runner-a"), "{}", stderr(&out));

    let free = create(&s, "free");
    let out = s.pad_output(["run", &free, "--", "/no/such/program"]);
    assert_eq!(code(&out), 127, "{}", stderr(&out));
    assert!(show(&s, &free).get("lease").is_none(), "released when CMD cannot start");
    let out = s.pad_output(["run", &free, "--", "sh", "-c", "exit 3"]);
    assert_eq!(code(&out), 3, "the child's exit code");
}

// --- L10: fencing ---------------------------------------------------------------

#[test]
fn a_paused_worker_with_a_stale_epoch_cannot_write() {
    let s = TestServer::start();
    let r = create(&s, "fenced");
    let paused = s.pad_output(["item", "claim", &r, "--holder", "paused", "--ttl", "1s"]);
    assert!(stdout(&paused).contains("epoch 1"), "{}", stdout(&paused));
    std::thread::sleep(Duration::from_millis(1300));
    let fresh = s.pad_output(["item", "claim", &r, "--holder", "fresh"]);
    assert!(stdout(&fresh).contains("epoch 2"), "{}", stdout(&fresh));
    let before = show(&s, &r);

    let update = s.pad_output(["item", "update", &r, "--title", "clobbered", "--lease-epoch", "1"]);
    assert_eq!(code(&update), 7, "{}", stdout(&update));
    assert!(stderr(&update).contains("lost") && stderr(&update).contains("epoch 2"), "{}", stderr(&update));
    let delete = s.pad_output(["item", "delete", &r, "--lease-epoch", "1"]);
    assert_eq!(code(&delete), 7, "{}", stdout(&delete));
    assert_eq!(show(&s, &r), before, "nothing changed");

    let ok = s.pad_output(["item", "update", &r, "--title", "by the holder", "--lease-epoch", "2"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert_eq!(show(&s, &r)["title"], "by the holder");
}

// --- L13: quarantine ------------------------------------------------------------

#[test]
fn an_item_whose_holders_keep_crashing_is_quarantined() {
    let s = TestServer::start();
    let r = create(&s, "poison");
    let frontier = |autonomous: bool| -> Vec<String> {
        let mut args = vec!["item", "frontier", "--format", "json"];
        if autonomous {
            args.push("--autonomous");
        }
        let out = s.pad_output(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["items"].as_array().unwrap().iter().map(|i| i["ref"].as_str().unwrap().to_string()).collect()
    };
    for crash in 1..=3 {
        assert_eq!(frontier(true), std::slice::from_ref(&r), "still autonomous work before crash {crash}");
        // A worker that claims and dies: the lease ends by expiry.
        let claim = s.pad_output(["item", "claim", &r, "--holder", &format!("crasher-{crash}"), "--ttl", "1s"]);
        assert!(claim.status.success(), "{}", stderr(&claim));
        std::thread::sleep(Duration::from_millis(1100));
    }
    wait_for("quarantine", Duration::from_secs(30), || frontier(true).is_empty());
    assert_eq!(frontier(false), std::slice::from_ref(&r), "still ready work for people");
    assert!(show(&s, &r)["labels"].as_array().unwrap().contains(&"needs-human".into()));

    let events = block_on(client(&s).events(WS, 0, 500)).unwrap();
    let q = events.iter().find(|e| e.kind == pad_core::EventKind::ItemQuarantined).expect("an item.quarantined event");
    assert_eq!(q.item_ref.as_deref(), Some(r.as_str()));
    let reason = q.data["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("expired 3 times"), "{}", q.data);
}

// --- pad drain ------------------------------------------------------------------

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

#[test]
fn drain_max_runs_exactly_that_many_and_done_on_success_closes_them() {
    let s = TestServer::start();
    let refs = block_on(create_items(&client(&s), 6));
    let file = s.home.join("ran.txt");
    let script = format!("echo $PAD_REF >> {}", file.display());

    let out = s.pad_output(["drain", "--max", "3", "--", "sh", "-c", &script]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("drained 3 items: 3 succeeded, 0 failed"), "{}", stderr(&out));
    let ran = lines(&file);
    assert_eq!(ran, refs[..3], "best first: same priority, oldest first");
    for r in &refs {
        assert_eq!(show(&s, r)["status"], "open", "not marked done without --done-on-success");
    }

    std::fs::remove_file(&file).unwrap();
    let out = s.pad_output(["drain", "--max", "3", "--done-on-success", "--", "sh", "-c", &script]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(lines(&file), refs[..3]);
    for (i, r) in refs.iter().enumerate() {
        let item = show(&s, r);
        assert_eq!(item["status"], if i < 3 { "done" } else { "open" }, "{r}");
        assert!(item.get("lease").is_none(), "{r} released");
    }
}

#[test]
fn drain_moves_past_failures_and_runs_each_item_once() {
    let s = TestServer::start();
    let refs = block_on(create_items(&client(&s), 4));
    let file = s.home.join("ran.txt");
    // Fails on the first and third item; the items stay open and ready.
    let script =
        format!("echo $PAD_REF >> {}; case $PAD_REF in {}|{}) exit 1;; esac", file.display(), refs[0], refs[2]);
    let out = s.pad_output(["drain", "--done-on-success", "--", "sh", "-c", &script]);
    assert_eq!(code(&out), 0, "a failing child does not fail the drain: {}", stderr(&out));
    assert!(stderr(&out).contains("drained 4 items: 2 succeeded, 2 failed; 2 marked done"), "{}", stderr(&out));
    assert_eq!(lines(&file), refs, "each item once");
    let status: Vec<Value> = refs.iter().map(|r| show(&s, r)["status"].clone()).collect();
    assert_eq!(status, ["open", "done", "open", "done"]);

    // A failure is recorded on the item (L14): counted, noted, backing off.
    let failed = show(&s, &refs[0]);
    assert_eq!(failed["failures"], 1, "{failed}");
    assert!(failed["retry_at"].is_string(), "{failed}");
    assert!(failed["last_failure_note"].as_str().unwrap_or_default().contains("exited 1"), "{failed}");
    assert!(failed.get("lease").is_none());

    // --once: the one item's exit code; then nothing ready is exit 5 (the
    // failed items wait for their retry time).
    let extra = block_on(create_items(&client(&s), 2));
    let out = s.pad_output(["drain", "--once", "--", "sh", "-c", "exit 4"]);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    let out = s.pad_output(["drain", "--once", "--done-on-success", "--", "true"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(show(&s, &extra[1])["status"], "done");
    let out = s.pad_output(["drain", "--once", "--", "true"]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(stderr(&out).contains("No ready item"), "{}", stderr(&out));
}

/// A settings change under a running drain makes its claim of the next item
/// invalid (a maximum TTL below `--ttl`): the server refuses the end with
/// it, having written nothing, so the drain makes the end again without it
/// and the job's success is still recorded (docs/leases.md, "Draining").
#[test]
fn an_end_refused_for_its_next_claim_alone_is_made_again_without_it() {
    let s = TestServer::start();
    let refs = block_on(create_items(&client(&s), 2));
    let pad = env!("CARGO_BIN_EXE_pad");
    let script = format!("{pad} workspace set --default-ttl 20s --max-ttl 30s");
    let out = s.pad_output(["drain", "--ttl", "60s", "--done-on-success", "--", "sh", "-c", &script]);
    let first = show(&s, &refs[0]);
    assert_eq!(first["status"], "done", "the job's success was recorded: {first}\n{}", stderr(&out));
    assert!(first.get("lease").is_none(), "{first}");
    // Its own claim-next is now refused too: the drain stops and says why.
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("`--ttl` must be between 1s and 30s"), "{}", stderr(&out));
    let second = show(&s, &refs[1]);
    assert_eq!((second["status"].as_str(), second.get("lease")), (Some("open"), None), "{second}");
}

/// `--next` on `pad item complete`, `fail` and `release`: the end, then
/// the next item claimed for the same holder in the same request, chosen
/// by the filters (docs/api.md, "The next item in the same call").
#[test]
fn item_complete_fail_and_release_take_next() {
    let s = TestServer::start();
    let refs = block_on(create_items(&client(&s), 3));
    let other = create(&s, "a bug");
    let o = s.pad_output(["item", "update", &other, "--kind", "bug"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let json = |o: &std::process::Output| -> Value { serde_json::from_slice(&o.stdout).expect("JSON on stdout") };

    let a = s.pad_output(["--format", "json", "item", "claim-next", "--holder", "w"]);
    let epoch = json(&a)["lease"]["epoch"].to_string();
    let o = s.pad_output([
        "--format",
        "json",
        "item",
        "complete",
        &refs[0],
        "--epoch",
        &epoch,
        "--holder",
        "w",
        "--next",
        "--next-ttl",
        "90s",
        "--exclude",
        &refs[1],
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["item"]["status"], "done", "{v}");
    assert_eq!(v["next"]["item"]["ref"], refs[2].as_str(), "the filter chose it: {v}");
    assert_eq!(
        (v["next"]["lease"]["holder"].as_str(), v["next"]["lease"]["ttl_seconds"].as_i64()),
        (Some("w"), Some(90))
    );

    let epoch = v["next"]["lease"]["epoch"].to_string();
    let o = s.pad_output(["item", "fail", &refs[2], "--epoch", &epoch, "--holder", "w", "--next", "--kind", "bug"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with(&format!("Failed {} (failure 1)", refs[2])), "{text}");
    assert!(text.contains(&format!("Claimed {other}: w, epoch 1")), "{text}");

    let o = s.pad_output(["item", "release", &other, "--holder", "w", "--next", "--kind", "bug", "--exclude", &other]);
    assert_eq!(code(&o), 0, "the end is what the command reports: {}", stderr(&o));
    assert_eq!(stdout(&o), "Lease released\nNo ready item\n");

    // Filters without --next would be ignored: refused, nothing changed.
    let b = s.pad_output(["--format", "json", "item", "claim-next", "--holder", "w"]);
    let (held, epoch) = (json(&b)["item"]["ref"].as_str().unwrap().to_string(), json(&b)["lease"]["epoch"].to_string());
    let o = s.pad_output(["item", "complete", &held, "--epoch", &epoch, "--holder", "w", "--label", "x"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("add --next"), "{}", stderr(&o));
    assert_eq!(show(&s, &held)["lease"]["epoch"].to_string(), epoch, "the lease is still held");
}

/// No churn: a drain hands out each epoch only to run it. Two items the
/// drain already ran (it left them open) are excluded, not claimed and given
/// back: each item's epoch is 1 after the drain.
#[test]
fn drain_never_claims_an_item_it_will_not_run() {
    let s = TestServer::start();
    let refs = block_on(create_items(&client(&s), 3));
    let out = s.pad_output(["drain", "--", "true"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("drained 3 items: 3 succeeded, 0 failed"), "{}", stderr(&out));
    let events = block_on(client(&s).events(WS, 0, 500)).unwrap();
    let kind = |e: &pad_core::Event| serde_json::to_value(e.kind).unwrap();
    let claims = events.iter().filter(|e| kind(e) == "lease.claimed").count();
    let releases = events.iter().filter(|e| kind(e) == "lease.released").count();
    assert_eq!((claims, releases), (3, 3), "one claim and one release per item run");
    for r in &refs {
        assert_eq!(show(&s, r)["last_lease"]["epoch"], 1, "{r}");
    }
}

#[test]
fn claim_next_prints_the_lease_and_the_handoff_note() {
    let s = TestServer::start();
    let r = create(&s, "migration");
    let nothing = s.pad_output(["item", "claim-next", "--kind", "bug"]);
    assert_eq!(code(&nothing), 5);
    assert!(stderr(&nothing).contains("No ready item"), "{}", stderr(&nothing));

    let a = s.pad_output(["item", "claim-next", "--holder", "runner-a", "--note", "migrated 3 of 7 tables"]);
    assert!(stdout(&a).starts_with(&format!("Claimed {r}: runner-a, epoch 1")), "{}", stdout(&a));
    let rel = s.pad_output(["item", "release", &r, "--holder", "runner-a"]);
    assert!(rel.status.success(), "{}", stderr(&rel));

    let b = s.pad_output(["item", "claim-next", "--holder", "runner-b", "--ttl", "90s", "--format", "json"]);
    let v: Value = serde_json::from_slice(&b.stdout).unwrap();
    assert_eq!((v["item"]["ref"].as_str(), v["lease"]["epoch"].as_i64()), (Some(r.as_str()), Some(2)));
    assert_eq!(v["lease"]["ttl_seconds"], 90);
    assert_eq!(
        (v["previous_holder"].as_str(), v["previous_note"].as_str()),
        (Some("runner-a"), Some("migrated 3 of 7 tables"))
    );
    let rel = s.pad_output(["item", "release", &r, "--holder", "runner-b"]);
    assert!(rel.status.success());
    let c = s.pad_output(["item", "claim-next", "--holder", "runner-c"]);
    assert!(stdout(&c).contains("Handoff from runner-a: migrated 3 of 7 tables"), "{}", stdout(&c));

    let none = s.pad_output(["item", "claim-next", "--format", "json"]);
    assert_eq!(code(&none), 5);
    let v: Value = serde_json::from_slice(&none.stdout).unwrap();
    assert_eq!((v["item"].is_null(), v["lease"].is_null()), (true, true));
}

#[test]
fn claim_next_takes_several_at_once_and_waits_for_work() {
    let s = TestServer::start();
    let (a, b) = (create(&s, "first"), create(&s, "second"));
    for bad in [["--count", "0"], ["--count", "33"], ["--wait", "31s"], ["--wait", "-1s"], ["--wait", "soon"]] {
        let out = s.pad_output(["item", "claim-next", bad[0], bad[1]]);
        assert_eq!(code(&out), 2, "{bad:?}: {}", stderr(&out));
    }
    assert_eq!(show(&s, &a)["lease"], Value::Null, "a refused flag claims nothing");

    let two = s.pad_output(["item", "claim-next", "--holder", "sup", "--count", "3", "--format", "json"]);
    let v: Value = serde_json::from_slice(&two.stdout).unwrap();
    let refs: Vec<_> = v["grants"].as_array().unwrap().iter().map(|g| g["item"]["ref"].clone()).collect();
    assert_eq!(refs, [Value::from(a.clone()), Value::from(b.clone())], "both ready items, fewer than asked");

    // A waiting claim takes an item created while it waits.
    let child = s
        .pad()
        .args(["item", "claim-next", "--holder", "waiter", "--wait", "25s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The server's own signal that the long poll has begun.
    wait_for("the claim to wait", Duration::from_secs(20), || claims_waiting(&s) >= 1);
    let c = create(&s, "third");
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).starts_with(&format!("Claimed {c}: waiter, epoch 1")), "{}", stdout(&out));
}

/// How many claim-nexts wait on `s` now, from its `/metrics`.
fn claims_waiting(s: &TestServer) -> u64 {
    let text = s.scrape();
    let line = text.lines().find(|l| l.starts_with("pad_claim_next_waiting ")).expect("the gauge is exposed");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

// --- Drains of any length ------------------------------------------------------

/// A drain of any length: 10 000 ready items, each run exactly once, the
/// user's `--exclude` honoured to the end, and every claim-next the drain
/// sends the same size as its first (nothing grows with the work done).
#[test]
fn a_drain_of_ten_thousand_items_runs_each_once_and_sends_the_same_claim_every_time() {
    const N: usize = 10_000;
    let s = TestServer::start();
    let refs = block_on(async {
        let c = client(&s);
        let mut refs = Vec::with_capacity(N);
        // Created concurrently: the store's group commit takes them in batches.
        for chunk in (0..N).collect::<Vec<_>>().chunks(200) {
            let mut made = tokio::task::JoinSet::new();
            for &i in chunk {
                let c = c.clone();
                made.spawn(async move {
                    let new = NewItem { title: format!("item {i}"), ..NewItem::default() };
                    (i, c.create_item(WS, &new).await.unwrap().item_ref.to_string())
                });
            }
            let mut made = made.join_all().await;
            made.sort();
            refs.extend(made.into_iter().map(|(_, r)| r));
        }
        refs
    });
    let (skip_a, skip_b) = (refs[3].clone(), refs[N - 2].clone());
    let proxy = Recorder::start(&s.url);
    let ran = tempfile::NamedTempFile::new().unwrap();
    let out = s
        .pad()
        .env("PAD_URL", &proxy.url)
        .env("PAD_TOKEN", &s.token)
        .args(["drain", "--exclude", &format!("{skip_a},{skip_b}"), "--format", "json", "--", "sh", "-c"])
        .arg(format!("echo \"$PAD_REF\" >> {}", ran.path().display()))
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let lines = std::fs::read_to_string(ran.path()).unwrap();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for l in lines.lines() {
        *counts.entry(l).or_default() += 1;
    }
    assert_eq!(counts.len(), N - 2, "every item but the two excluded ran");
    assert!(counts.values().all(|&c| c == 1), "no item ran twice");
    assert!(!counts.contains_key(skip_a.as_str()) && !counts.contains_key(skip_b.as_str()), "--exclude honoured");
    let seen = proxy.seen.lock().unwrap();
    let sizes = |path: &str| -> Vec<usize> {
        seen.iter().filter(|(line, _)| line.contains(path)).map(|&(_, len)| len).collect()
    };
    // The first item is claimed alone; each end claims the next in the same
    // request (docs/api.md, "The next item in the same call"), the last one
    // finding nothing.
    let (claims, ends) = (sizes("/claim-next"), sizes("/release"));
    assert_eq!(claims.len(), 1, "one claim-next, for the first item");
    assert_eq!(ends.len(), N - 2, "one release per item, each carrying the next claim");
    assert_eq!(seen.len(), N - 2 + 1, "one request per item, and the first claim: {:?}", &seen[..5]);
    // What an end sends differs only in the ref and the lease's numbers.
    let (min, max) = (ends.iter().min().unwrap(), ends.iter().max().unwrap());
    assert!(max - min <= 12, "the ends' bodies stay {min}..{max} bytes from the first item to the last");
}

/// News that is true (docs/leases.md): after a failure, a successful run
/// clears the handoff, and `item show` says the last outcome was a success.
#[test]
fn a_success_after_failures_is_the_news() {
    let s = TestServer::start();
    let r = create(&s, "flaky build");
    for _ in 0..2 {
        let out = s.pad_output(["run", &r, "--", "sh", "-c", "exit 2"]);
        assert_eq!(code(&out), 2, "{}", stderr(&out));
    }
    let out = s.pad_output(["run", &r, "--", "true"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("exited 2"), "the run was told of the failure: {}", stderr(&out));
    let shown = stdout(&s.pad_output(["item", "show", &r]));
    assert!(shown.contains("Outcome:  succeeded"), "{shown}");
    assert!(shown.contains("Failures: 2 before that"), "{shown}");
    assert!(!shown.contains("Failed:"), "{shown}");
    let next = s.pad_output(["item", "claim", &r, "--holder", "next"]);
    assert_eq!(code(&next), 0, "{}", stderr(&next));
    assert!(!stdout(&next).contains("Handoff"), "no stale handoff: {}", stdout(&next));
}
