//! `pad drain --jobs N` and `pad drain --follow` (docs/leases.md,
//! "Draining"), end to end: a real `pad serve`, real `pad drain`
//! processes, real commands. Concurrency is proven with a barrier the
//! commands keep themselves, never with timing.

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use common::cli::{code, create, show, stderr, stdout, wait_for};
use common::recorder::Recorder;
use common::server::TestServer;
use serde_json::Value;

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

/// Whether `pid` is a live process (a zombie is dead: it runs nothing).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])))
}

fn json_lines(o: &Output) -> Vec<Value> {
    stdout(o).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

fn signal(child: &Child, sig: &str) {
    let ok = std::process::Command::new("kill").args([&format!("-{sig}"), &child.id().to_string()]).status().unwrap();
    assert!(ok.success());
}

/// `--jobs 4` runs four commands at once: each of the first four waits
/// until four have started, which only four concurrent jobs can get past
/// (`--timeout` turns a missing one into a failure, not a hang). Every
/// item runs exactly once, and each job prints its own JSON line.
#[test]
fn jobs_4_runs_four_commands_at_once_each_item_once() {
    let s = TestServer::start();
    let refs: Vec<String> = (0..8).map(|i| create(&s, &format!("item {i}"))).collect();
    let dir = s.home.join("barrier");
    let live = s.home.join("live");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&live).unwrap();
    let ran = s.home.join("ran.txt");
    let most = s.home.join("most.txt");
    let script = format!(
        "touch {dir}/$PAD_REF; mkdir {live}/$PAD_REF; ls {live} | wc -l >> {most}; \
         while [ $(ls {dir} | wc -l) -lt 4 ]; do sleep 0.05; done; \
         echo $PAD_REF >> {ran}; rmdir {live}/$PAD_REF",
        dir = dir.display(),
        live = live.display(),
        most = most.display(),
        ran = ran.display()
    );
    let out = s.pad_output([
        "drain",
        "--jobs",
        "4",
        "--timeout",
        "60s",
        "--done-on-success",
        "--format",
        "json",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let mut counts: HashMap<String, usize> = HashMap::new();
    for r in lines(&ran) {
        *counts.entry(r).or_default() += 1;
    }
    assert_eq!(counts.len(), refs.len(), "every item ran: {counts:?}");
    assert!(counts.values().all(|&n| n == 1), "no item ran twice: {counts:?}");
    let at_once: Vec<usize> = lines(&most).iter().map(|l| l.trim().parse().unwrap()).collect();
    assert!(at_once.iter().all(|&n| n <= 4), "never more than 4 at once: {at_once:?}");

    let json = json_lines(&out);
    assert_eq!(json.len(), refs.len() + 1, "a line per job and a summary: {}", stdout(&out));
    let mut reported: Vec<&str> = json[..refs.len()].iter().map(|l| l["ref"].as_str().unwrap()).collect();
    reported.sort();
    let mut expected: Vec<&str> = refs.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(reported, expected);
    assert!(json[..refs.len()].iter().all(|l| l["outcome"] == "succeeded" && l["status"] == "done"), "{json:?}");
    let summary = &json[refs.len()];
    assert_eq!((summary["summary"].as_bool(), summary["items"].as_u64()), (Some(true), Some(8)), "{summary}");
    assert_eq!(summary["marked_done"], 8);
    for r in &refs {
        assert!(show(&s, r).get("lease").is_none(), "{r} released");
    }
}

/// `--max` counts what is claimed, not only what has run: with four jobs
/// ending at once and each end able to claim the next item in the same
/// request, a drain of at most 6 claims exactly 6 items, runs them, and
/// never claims one to give it back (docs/leases.md, "Draining").
#[test]
fn jobs_4_with_max_6_claims_exactly_six_items() {
    let s = TestServer::start();
    let refs: Vec<String> = (0..12).map(|i| create(&s, &format!("item {i}"))).collect();
    for round in 0..2 {
        let out = s.pad_output(["drain", "--jobs", "4", "--max", "6", "--done-on-success", "--", "true"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let items: Vec<Value> = refs.iter().map(|r| show(&s, r)).collect();
        let done = items.iter().filter(|i| i["status"] == "done").count();
        assert_eq!(done, 6 * (round + 1), "round {round}: {}", stderr(&out));
        for i in &items {
            assert!(i.get("lease").is_none(), "nothing left held: {i}");
            if i["status"] == "open" {
                assert!(i["last_lease"].is_null(), "an open item was never claimed: {i}");
            }
        }
    }
}

#[test]
fn jobs_out_of_bounds_is_a_usage_error_and_claims_nothing() {
    let s = TestServer::start();
    let r = create(&s, "untouched");
    for jobs in ["0", "33", "many"] {
        let out = s.pad_output(["drain", "--jobs", jobs, "--", "true"]);
        assert_eq!(code(&out), 2, "--jobs {jobs}: {}", stderr(&out));
        assert!(stderr(&out).contains("--jobs"), "names the option: {}", stderr(&out));
    }
    let item = show(&s, &r);
    assert!(item.get("lease").is_none() && item["last_lease"].is_null(), "never claimed: {item}");
    let help = s.pad_output(["drain", "--help"]);
    assert!(stdout(&help).contains("--jobs") && stdout(&help).contains("--follow"), "{}", stdout(&help));
}

/// Ctrl-C reaches every job's group; each lease is released; the drain
/// prints its summary and exits 130.
#[test]
fn ctrl_c_stops_every_job_and_releases_every_lease() {
    let s = TestServer::start();
    let refs: Vec<String> = (0..3).map(|i| create(&s, &format!("long {i}"))).collect();
    let dir = s.home.join("pids");
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!("echo $$ > {d}/$PAD_REF.tmp; mv {d}/$PAD_REF.tmp {d}/$PAD_REF; sleep 300", d = dir.display());
    let drain = s
        .pad()
        .args(["drain", "--jobs", "3", "--ttl", "1m", "--kill-after", "2s", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("three jobs", Duration::from_secs(20), || refs.iter().all(|r| dir.join(r).exists()));
    let pids: Vec<u32> =
        refs.iter().map(|r| std::fs::read_to_string(dir.join(r)).unwrap().trim().parse().unwrap()).collect();
    for r in &refs {
        assert!(show(&s, r).get("lease").is_some(), "{r} leased while its job runs");
    }
    signal(&drain, "INT");
    let out = drain.wait_with_output().unwrap();
    assert_eq!(code(&out), 130, "{}", stderr(&out));
    assert!(stderr(&out).contains("drained 3 items: 0 succeeded, 0 failed, 3 interrupted"), "{}", stderr(&out));
    for pid in pids {
        assert!(!alive(pid), "job {pid} still runs");
    }
    for r in &refs {
        let item = show(&s, r);
        assert!(item.get("lease").is_none(), "released: {item}");
        assert_eq!((item["status"].as_str(), item["failures"].as_i64()), (Some("open"), Some(0)), "{item}");
    }
}

/// `--follow`: the drain goes idle when nothing is ready and sends nothing
/// but its long poll; an item created afterwards, by another pad process,
/// is run; Ctrl-C ends it cleanly (summary, exit 130).
#[test]
fn follow_waits_without_polling_and_runs_what_arrives() {
    let s = TestServer::start();
    let first = create(&s, "there before");
    let proxy = Recorder::start(&s.url);
    let ran = s.home.join("ran.txt");
    let drain = s
        .pad()
        .env("PAD_URL", &proxy.url)
        .env("PAD_TOKEN", &s.token)
        .args(["drain", "--follow", "--format", "json", "--", "sh", "-c"])
        .arg(format!("echo $PAD_REF >> {}", ran.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let requests = || proxy.seen.lock().unwrap().clone();
    let claims = |seen: &[(String, usize)]| seen.iter().filter(|(l, _)| l.contains("/claim-next")).count();
    // The first item, whose end's claim finds nothing (docs/api.md, "The
    // next item in the same call"), then the long poll.
    wait_for("the drain to go idle", Duration::from_secs(20), || claims(&requests()) >= 2);
    assert_eq!(lines(&ran), std::slice::from_ref(&first));
    let idle = requests();
    let idle_since = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let after = requests();
    eprintln!("idle for {:?}: {} requests before, {} after", idle_since.elapsed(), idle.len(), after.len());
    assert_eq!(
        after.len(),
        idle.len(),
        "an idle drain sends nothing while its long poll waits: {:?}",
        &after[idle.len()..]
    );

    let second = create(&s, "arrives later");
    wait_for("the new item to run", Duration::from_secs(20), || lines(&ran).len() == 2);
    assert_eq!(lines(&ran), [first.clone(), second.clone()]);
    wait_for("the drain to go idle again", Duration::from_secs(20), || claims(&requests()) >= 3);
    signal(&drain, "INT");
    let out = drain.wait_with_output().unwrap();
    assert_eq!(code(&out), 130, "{}", stderr(&out));
    let json = json_lines(&out);
    assert_eq!(json.len(), 3, "two items and the summary: {}", stdout(&out));
    assert_eq!((json[0]["ref"].as_str(), json[1]["ref"].as_str()), (Some(first.as_str()), Some(second.as_str())));
    assert_eq!((json[2]["summary"].as_bool(), json[2]["succeeded"].as_u64()), (Some(true), Some(2)));
    for r in [&first, &second] {
        assert!(show(&s, r).get("lease").is_none(), "{r} released");
    }
}

/// `--follow` with a short TTL: an item that arrives late in the long poll,
/// later than S2 would let pad run on the grant (its count starts when the
/// poll was sent), is renewed before its command starts and then runs
/// like any other (docs/leases.md, "`--follow`: as work arrives"), not
/// reported lost the moment it is granted.
#[test]
fn follow_runs_an_item_granted_late_in_a_long_poll() {
    // S2's stop point is 6.75 s after a request: a renewal may be seconds
    // late on a busy machine without stopping the command, and a poll that
    // waits 7.5 s is still well past the stop point of its grant.
    const TTL: Duration = Duration::from_secs(8);
    let s = TestServer::start();
    let ran = s.home.join("ran.txt");
    let script = format!("echo started >> {r}; sleep 2; echo $PAD_REF >> {r}", r = ran.display());
    let drain = s
        .pad()
        .args(["drain", "--follow", "--max", "1", "--ttl", "8s", "--kill-after", "1s", "--done-on-success"])
        .args(["--format", "json", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the drain's long poll", Duration::from_secs(20), || {
        s.scrape().lines().any(|l| l == "pad_claim_next_waiting 1")
    });
    // The poll has waited past S2's stop point for a grant sent with it.
    std::thread::sleep(TTL - Duration::from_millis(500));
    let r = create(&s, "arrives late");
    let out = drain.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        lines(&ran),
        ["started".to_string(), r.clone()],
        "the command ran to its end: {}{}",
        stdout(&out),
        stderr(&out)
    );
    let json = json_lines(&out);
    assert_eq!(json.len(), 2, "the item and the summary: {}", stdout(&out));
    assert_eq!(
        (json[0]["ref"].as_str(), json[0]["outcome"].as_str()),
        (Some(r.as_str()), Some("succeeded")),
        "{}",
        stderr(&out)
    );
    assert_eq!((json[1]["succeeded"].as_u64(), json[1]["lease_lost"].as_u64()), (Some(1), Some(0)), "{}", json[1]);
    let item = show(&s, &r);
    assert!(item.get("lease").is_none(), "the lease ended: {item}");
    assert_eq!(item["status"], "done", "{item}");
}

/// One heartbeat for all jobs: while three jobs run, their leases are
/// renewed together, in `POST …/leases/renew`, never one item at a time.
#[test]
fn the_leases_of_all_jobs_are_renewed_in_one_request() {
    let s = TestServer::start();
    let refs: Vec<String> = (0..3).map(|i| create(&s, &format!("held {i}"))).collect();
    let proxy = Recorder::start(&s.url);
    let go = s.home.join("go");
    let script = format!("while [ ! -e {} ]; do sleep 0.05; done", go.display());
    let drain = s
        .pad()
        .env("PAD_URL", &proxy.url)
        .env("PAD_TOKEN", &s.token)
        .args(["drain", "--jobs", "3", "--ttl", "6s", "--kill-after", "1s", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let renewals = |batch: bool| {
        let seen = proxy.seen.lock().unwrap();
        seen.iter().filter(|(l, _)| l.contains("/renew") && l.contains("/leases/renew") == batch).count()
    };
    wait_for("two rounds of renewals", Duration::from_secs(30), || renewals(true) >= 2);
    std::fs::write(&go, "").unwrap();
    let out = drain.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("drained 3 items: 3 succeeded, 0 failed"), "{}", stderr(&out));
    eprintln!("{} renewal requests for 3 leases", renewals(true));
    assert_eq!(renewals(false), 0, "no lease renewed on its own");
    for r in &refs {
        assert!(show(&s, r).get("lease").is_none(), "{r} released");
    }
}
