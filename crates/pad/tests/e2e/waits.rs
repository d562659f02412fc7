//! Waiting for work through the real binary: `pad item claim-next --wait`
//! and a `pad drain --follow` whose server goes away and comes back
//! (docs/leases.md, "`--follow`: as work arrives").

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::cli::{code, create, show, stderr, stdout, wait_for};
use common::server::TestServer;
use serde_json::Value;

/// A net against a hang, not a measure of speed.
const LONG: Duration = Duration::from_secs(60);

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

fn signal(child: &Child, sig: &str) {
    let ok = std::process::Command::new("kill").args([&format!("-{sig}"), &child.id().to_string()]).status().unwrap();
    assert!(ok.success());
}

/// How many claim-nexts wait on `s` now, from its `/metrics`.
fn claims_waiting(s: &TestServer) -> u64 {
    let text = s.scrape();
    let line = text.lines().find(|l| l.starts_with("pad_claim_next_waiting ")).expect("the gauge is exposed");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// The child's stderr, read as it comes on a thread of its own, so a test
/// can wait for a line while the child runs.
fn collect_stderr(child: &mut Child) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let pipe = child.stderr.take().expect("piped stderr");
    let into = Arc::clone(&seen);
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            into.lock().unwrap().push(line);
        }
    });
    seen
}

fn said(seen: &Mutex<Vec<String>>, what: &str) -> usize {
    seen.lock().unwrap().iter().filter(|l| l.contains(what)).count()
}

/// `--wait` is bounded to 30 s, so a bare number can only mean seconds:
/// it is read so, unlike `--ttl`'s; past the bound it is still refused.
#[test]
fn claim_next_wait_takes_a_bare_number_of_seconds() {
    let s = TestServer::start();
    let (a, b) = (create(&s, "first"), create(&s, "second"));
    for bad in ["31", "-1", "99999999999999999999999", "5x"] {
        let out = s.pad_output(["item", "claim-next", "--wait", bad]);
        assert_eq!(code(&out), 2, "--wait {bad}: {}", stderr(&out));
        if bad == "31" {
            assert!(stderr(&out).contains("at most 30s"), "{}", stderr(&out));
        }
    }
    assert_eq!(show(&s, &a)["lease"], Value::Null, "a refused flag claims nothing");
    for (wait, expect) in [("5", &a), ("0", &b)] {
        let out = s.pad_output(["item", "claim-next", "--holder", "w", "--wait", wait]);
        assert_eq!(code(&out), 0, "--wait {wait}: {}", stderr(&out));
        assert!(stdout(&out).starts_with(&format!("Claimed {expect}: w")), "--wait {wait}: {}", stdout(&out));
    }
}

/// The server goes away under a `--follow` drain and comes back on the same
/// address and database: the drain says once that claims fail, keeps
/// trying, says once that they get through again, and runs an item created
/// after the restart. It is still running until Ctrl-C.
#[test]
fn a_follow_drain_outlives_a_server_restart() {
    let mut s = TestServer::start();
    let first = create(&s, "before");
    let ran = s.home.join("ran.txt");
    let mut drain = s
        .pad()
        .args(["drain", "--follow", "--format", "json", "--", "sh", "-c"])
        .arg(format!("echo $PAD_REF >> {}", ran.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = collect_stderr(&mut drain);
    wait_for("the first item to run", LONG, || lines(&ran) == [first.clone()]);
    wait_for("the drain's long poll", LONG, || claims_waiting(&s) == 1);

    s.stop();
    wait_for("the drain to see its server gone", LONG, || {
        said(&seen, "could not claim work") == 1 || drain.try_wait().unwrap().is_some()
    });
    assert!(drain.try_wait().unwrap().is_none(), "the drain ended: {:?}", seen.lock().unwrap());

    s.restart();
    let second = create(&s, "after the restart");
    wait_for("the new item to run", LONG, || lines(&ran).len() == 2);
    assert_eq!(lines(&ran), [first.clone(), second.clone()]);
    wait_for("the drain to say claims get through", LONG, || said(&seen, "claims get through again") == 1);
    wait_for("the drain's long poll, again", LONG, || claims_waiting(&s) == 1);
    assert!(drain.try_wait().unwrap().is_none(), "the drain ended: {:?}", seen.lock().unwrap());
    assert_eq!(said(&seen, "could not claim work"), 1, "one line, not one per try: {:?}", seen.lock().unwrap());

    signal(&drain, "INT");
    let out: Output = drain.wait_with_output().unwrap();
    assert_eq!(code(&out), 130, "{:?}", seen.lock().unwrap());
    let json: Vec<Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(json.len(), 3, "two items and the summary: {}", stdout(&out));
    assert_eq!((json[0]["ref"].as_str(), json[1]["ref"].as_str()), (Some(first.as_str()), Some(second.as_str())));
    assert_eq!((json[2]["summary"].as_bool(), json[2]["succeeded"].as_u64()), (Some(true), Some(2)));
    assert!(show(&s, &second).get("lease").is_none(), "released");
}

/// SIGTERM while a `--follow` drain waits to try its claim again stops it
/// as any signal does: the summary, exit 143.
#[test]
fn a_follow_drain_without_its_server_stops_cleanly_on_sigterm() {
    let mut s = TestServer::start();
    let mut drain =
        s.pad().args(["drain", "--follow", "--", "true"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let seen = collect_stderr(&mut drain);
    wait_for("the drain's long poll", LONG, || claims_waiting(&s) == 1);
    s.stop();
    wait_for("the drain to see its server gone", LONG, || {
        said(&seen, "could not claim work") == 1 || drain.try_wait().unwrap().is_some()
    });
    assert!(drain.try_wait().unwrap().is_none(), "the drain ended: {:?}", seen.lock().unwrap());
    signal(&drain, "TERM");
    wait_for("the drain to stop", LONG, || drain.try_wait().unwrap().is_some());
    let status = drain.wait().unwrap();
    assert_eq!(status.code(), Some(143), "{:?}", seen.lock().unwrap());
    wait_for("the summary", LONG, || said(&seen, "drained 0 items") == 1);
}
