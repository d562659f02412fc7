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

/// `sh -c` text for a job that logs `$PAD_REF` to `ran`; the first job
/// then waits for the file `go` and exits `code`, later ones exit 0 at once.
fn first_waits(ran: &Path, go: &Path, code: i32) -> String {
    let (ran, go) = (ran.display(), go.display());
    format!(
        "echo $PAD_REF >> {ran}; if [ \"$(wc -l < {ran})\" -eq 1 ]; then \
         while [ ! -e {go} ]; do sleep 0.05; done; exit {code}; fi; sleep 0.5"
    )
}

/// The JSON lines of a drain's stdout.
fn json_lines(out: &Output) -> Vec<Value> {
    stdout(out).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A job whose command ends while the server is down: the drain keeps
/// trying to record its outcome, says so once, and once the server is back
/// on the same address and database (long before the lease could expire)
/// the item is marked done and the drain goes on to the next item
/// (docs/leases.md, "Draining").
#[test]
fn a_drain_records_an_outcome_once_its_server_is_back() {
    let mut s = TestServer::start();
    let refs = [create(&s, "first"), create(&s, "second")];
    let (ran, go) = (s.home.join("ran.txt"), s.home.join("go"));
    let mut drain = s
        .pad()
        .args(["drain", "--done-on-success", "--ttl", "10m", "--format", "json", "--", "sh", "-c"])
        .arg(first_waits(&ran, &go, 0))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = collect_stderr(&mut drain);
    wait_for("the first job to start", LONG, || lines(&ran).len() == 1);

    s.stop();
    std::fs::write(&go, "").unwrap();
    wait_for("the drain to see it cannot record the outcome", LONG, || {
        said(&seen, "could not record the outcome") == 1 || drain.try_wait().unwrap().is_some()
    });
    assert!(drain.try_wait().unwrap().is_none(), "the drain ended: {:?}", seen.lock().unwrap());

    s.restart();
    wait_for("the drain to end", LONG, || drain.try_wait().unwrap().is_some());
    let out = drain.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{:?}", seen.lock().unwrap());
    wait_for("the drain to say the outcome got through", LONG, || said(&seen, "recorded the outcome of") == 1);
    assert_eq!(said(&seen, "could not record the outcome"), 1, "one line, not one per try: {:?}", seen.lock().unwrap());
    let json = json_lines(&out);
    assert_eq!(json.len(), 3, "two items and the summary: {}", stdout(&out));
    let first = lines(&ran)[0].clone();
    assert_eq!(json[0]["ref"].as_str(), Some(first.as_str()), "{json:?}");
    for item in &json[..2] {
        assert_eq!((item["outcome"].as_str(), item["status"].as_str()), (Some("succeeded"), Some("done")), "{item}");
        assert_eq!(item["recorded"].as_bool(), Some(true), "{item}");
    }
    assert_eq!((json[2]["succeeded"].as_u64(), json[2]["marked_done"].as_u64()), (Some(2), Some(2)), "{json:?}");
    for r in &refs {
        assert_eq!(show(&s, r)["status"], "done", "{r}");
    }
}

/// The server stays down past the lease of a job whose command has ended:
/// the drain gives the outcome up once the lease may have expired (the
/// item is the next claimant's), says so, and with `--follow` waits for
/// the server and runs the next item when it is back.
#[test]
fn a_follow_drain_gives_up_an_outcome_its_lease_outlived_and_goes_on() {
    let mut s = TestServer::start();
    let refs = [create(&s, "first"), create(&s, "second")];
    let (ran, go) = (s.home.join("ran.txt"), s.home.join("go"));
    let mut drain = s
        .pad()
        .args(["drain", "--follow", "--ttl", "10s", "--kill-after", "1s", "--format", "json", "--", "sh", "-c"])
        .arg(first_waits(&ran, &go, 3))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = collect_stderr(&mut drain);
    wait_for("the first job to start", LONG, || lines(&ran).len() == 1);
    let first = lines(&ran)[0].clone();

    s.stop();
    std::fs::write(&go, "").unwrap();
    for what in ["could not record the outcome", "gave up recording the outcome", "could not claim work"] {
        wait_for(what, LONG, || said(&seen, what) == 1 || drain.try_wait().unwrap().is_some());
        assert!(drain.try_wait().unwrap().is_none(), "the drain ended: {:?}", seen.lock().unwrap());
    }

    s.restart();
    wait_for("the second item to run", LONG, || lines(&ran).len() == 2);
    wait_for("the drain to say claims get through", LONG, || said(&seen, "claims get through again") == 1);
    // The second job ends at once; its outcome is recorded when its lease
    // is released. Interrupting the drain before then would interrupt it.
    let second = refs.iter().find(|r| **r != first).unwrap().clone();
    wait_for("the second job's release", LONG, || show(&s, &second)["last_lease"]["ended"] == "released");
    assert!(drain.try_wait().unwrap().is_none(), "the drain ended: {:?}", seen.lock().unwrap());
    assert_eq!(said(&seen, "could not record the outcome"), 1, "{:?}", seen.lock().unwrap());

    signal(&drain, "INT");
    let out = drain.wait_with_output().unwrap();
    assert_eq!(code(&out), 130, "{:?}", seen.lock().unwrap());
    let json = json_lines(&out);
    assert_eq!(json.len(), 3, "two items and the summary: {}", stdout(&out));
    assert_eq!(json[0]["ref"].as_str(), Some(first.as_str()), "{json:?}");
    assert_eq!((json[0]["outcome"].as_str(), json[0]["exit_code"].as_i64()), (Some("lease_lost"), Some(3)), "{json:?}");
    assert_eq!(json[0]["recorded"].as_bool(), Some(false), "{json:?}");
    assert_eq!(
        (json[1]["outcome"].as_str(), json[1]["recorded"].as_bool()),
        (Some("succeeded"), Some(true)),
        "{json:?}"
    );
    assert_eq!((json[2]["lease_lost"].as_u64(), json[2]["succeeded"].as_u64()), (Some(1), Some(1)), "{json:?}");
    assert_eq!(show(&s, &first)["failures"].as_i64(), Some(0), "the failure was not recorded");
    assert!(refs.contains(&first));
}

/// SIGTERM while `pad run` tries to record an outcome its server is not
/// there to take stops the trying at once (the lease, minutes long, expires
/// on its own): exit 143, the outcome said to be not recorded.
#[test]
fn a_signal_stops_a_run_trying_to_record_its_outcome() {
    let mut s = TestServer::start();
    let item = create(&s, "only");
    let (ran, go) = (s.home.join("ran.txt"), s.home.join("go"));
    let mut run = s
        .pad()
        .args(["run", &item, "--done-on-success", "--ttl", "10m", "--format", "json", "--", "sh", "-c"])
        .arg(first_waits(&ran, &go, 0))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = collect_stderr(&mut run);
    wait_for("the job to start", LONG, || lines(&ran).len() == 1);
    s.stop();
    std::fs::write(&go, "").unwrap();
    wait_for("pad to see it cannot record the outcome", LONG, || {
        said(&seen, "could not record the outcome") == 1 || run.try_wait().unwrap().is_some()
    });
    assert!(run.try_wait().unwrap().is_none(), "pad run ended: {:?}", seen.lock().unwrap());

    signal(&run, "TERM");
    // Well within the lease's 10 minutes: the trying stopped.
    wait_for("pad run to stop", LONG, || run.try_wait().unwrap().is_some());
    let out = run.wait_with_output().unwrap();
    assert_eq!(code(&out), 143, "{:?}", seen.lock().unwrap());
    let json = json_lines(&out);
    assert_eq!(
        (json[0]["outcome"].as_str(), json[0]["recorded"].as_bool()),
        (Some("interrupted"), Some(false)),
        "{json:?}"
    );
}
