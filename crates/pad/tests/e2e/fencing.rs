//! The lease at its edges (docs/leases.md, "S2: the holder stops first" and
//! "pad guard"): a supervisor cut off from its server stops its command
//! before the lease can expire, so a second worker never overlaps with it;
//! `pad guard` runs a side effect only under a live lease; and a sink that
//! keeps the highest epoch it has seen refuses a stale writer.

use crate::common;

use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use common::pg::ScratchDb;
use common::server::TestServer;
use serde_json::Value;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited, not killed")
}

fn claim(s: &TestServer, r: &str, holder: &str, ttl: &str) -> Value {
    let out = s.pad_output(["item", "claim", r, "--holder", holder, "--ttl", ttl, "--format", "json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn create(s: &TestServer, title: &str) -> String {
    let out = s.pad_output(["item", "create", title]);
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Nanosecond timestamps a command wrote, one per line.
fn stamps(path: &Path) -> Vec<u128> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// A command that ignores SIGTERM and writes a timestamp every 20 ms until
/// it is killed: the worst case of a side effect.
fn stubborn_writer(log: &Path) -> String {
    format!("trap '' TERM; while true; do date +%s%N >> {}; sleep 0.02; done", log.display())
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) on a child process of this test.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
}

/// A worker through `s` (`PAD_URL`/`PAD_TOKEN`, as for any second server).
fn worker(s: &TestServer, url: &str) -> std::process::Command {
    let mut cmd = s.pad();
    cmd.env("PAD_URL", url).env("PAD_TOKEN", &s.token).stdout(Stdio::null()).stderr(Stdio::piped());
    cmd
}

/// Two instances on one PostgreSQL; worker A's instance is frozen with
/// SIGSTOP (a partition, as A sees it) while A's command ignores SIGTERM and
/// writes timestamps; worker B, through the other instance, takes the item
/// at expiry and writes too. B's first write comes after A's last, for each
/// TTL / kill-after pair, with A's command run by `pad run` directly and
/// under `pad guard` inside it.
#[test]
fn a_partitioned_supervisor_stops_its_command_before_another_worker_starts() {
    let Some(db) = ScratchDb::create_blocking() else {
        eprintln!("SKIPPED a_partitioned_supervisor_…: set PAD_TEST_DATABASE_URL to run it");
        return;
    };
    let one = TestServer::start_with_db(&db.url);
    let two = one.start_sibling();
    let pad = env!("CARGO_BIN_EXE_pad");
    for (n, (ttl, kill_after, guarded)) in
        [("6s", "2s", false), ("4s", "1s", false), ("6s", "1s", true)].into_iter().enumerate()
    {
        let r = create(&one, &format!("partition {n}"));
        let dir = tempfile::tempdir().unwrap();
        let (a_log, b_log) = (dir.path().join("a.log"), dir.path().join("b.log"));
        let script = stubborn_writer(&a_log);
        let mut a_cmd = worker(&one, &one.url);
        a_cmd.args(["run", &r, "--holder", "worker-a", "--ttl", ttl, "--kill-after", kill_after, "--"]);
        if guarded {
            // The guard renews through the same (frozen) instance: it too must stop first.
            a_cmd.args([pad, "guard", "--", "sh", "-c", &script]);
        } else {
            a_cmd.args(["sh", "-c", &script]);
        }
        let mut a: Child = a_cmd.spawn().unwrap();
        wait_for("A's first write", Duration::from_secs(20), || !stamps(&a_log).is_empty());
        signal(one.pid(), libc::SIGSTOP);
        // B keeps trying through the other instance until it gets the item.
        let b_script = format!("date +%s%N >> {}; sleep 0.5", b_log.display());
        let started = Instant::now();
        loop {
            let out = worker(&one, &two.url)
                .args([
                    "run",
                    &r,
                    "--holder",
                    "worker-b",
                    "--ttl",
                    "30s",
                    "--kill-after",
                    "1s",
                    "--",
                    "sh",
                    "-c",
                    &b_script,
                ])
                .output()
                .unwrap();
            if code(&out) == 0 {
                break;
            }
            assert_eq!(code(&out), 7, "B: {}", stderr(&out));
            assert!(started.elapsed() < Duration::from_secs(60), "B never got the item");
            std::thread::sleep(Duration::from_millis(100));
        }
        signal(one.pid(), libc::SIGCONT);
        let (a_stamps, b_stamps) = (stamps(&a_log), stamps(&b_log));
        let (a_last, b_first) = (*a_stamps.iter().max().unwrap(), *b_stamps.iter().min().unwrap());
        assert!(
            b_first > a_last,
            "ttl {ttl}, kill-after {kill_after}, guarded {guarded}: A wrote {} ms after B started",
            (a_last - b_first) / 1_000_000
        );
        // Its instance back, A finishes: lease lost (exit 7), saying so.
        let deadline = Instant::now() + Duration::from_secs(30);
        while a.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = a.kill();
        let out = a.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(7), "A: {}", stderr(&out));
        assert!(stderr(&out).contains("lost"), "A said why it stopped: {}", stderr(&out));
    }
}

/// `pad guard` with a handle that is no longer live runs nothing (exit 7);
/// with too little time left (`--min-left`) runs nothing; inside `pad run`
/// it needs no flags and runs CMD.
#[test]
fn guard_runs_nothing_without_a_live_lease_and_runs_inside_pad_run() {
    let s = TestServer::start();
    let r = create(&s, "push a branch");
    let lease = claim(&s, &r, "ci-7", "60s");
    let id = lease["lease"]["lease_id"].as_i64().unwrap().to_string();
    let ran = s.home.join("ran");
    let touch = ["--", "touch", ran.to_str().unwrap()];

    let short = s
        .pad()
        .args(["guard", "--ref", &r, "--lease-id", &id, "--holder", "ci-7", "--min-left", "1h"])
        .args(touch)
        .output()
        .unwrap();
    assert_eq!(code(&short), 7, "{}", stderr(&short));
    assert!(stderr(&short).contains("--min-left") && stderr(&short).contains("was not run"), "{}", stderr(&short));
    assert!(!ran.exists(), "nothing ran with too little time left");

    let other = s
        .pad()
        .args(["guard", "--ref", &r, "--lease-id", &id, "--holder", "someone-else"])
        .args(touch)
        .output()
        .unwrap();
    assert_eq!(code(&other), 7, "{}", stderr(&other));
    assert!(!ran.exists(), "nothing ran for another holder");

    let ok = s.pad().args(["guard", "--ref", &r, "--lease-id", &id, "--holder", "ci-7"]).args(touch).output().unwrap();
    assert_eq!(code(&ok), 0, "{}", stderr(&ok));
    assert!(ran.exists(), "ran under the live lease");
    std::fs::remove_file(&ran).unwrap();

    let released = s.pad_output(["item", "release", &r, "--holder", "ci-7"]);
    assert!(released.status.success(), "{}", stderr(&released));
    let lost =
        s.pad().args(["guard", "--ref", &r, "--lease-id", &id, "--holder", "ci-7"]).args(touch).output().unwrap();
    assert_eq!(code(&lost), 7, "{}", stderr(&lost));
    assert!(stderr(&lost).contains("was not run"), "{}", stderr(&lost));
    assert!(!ran.exists(), "a released lease runs nothing");

    // Inside `pad run` the lease comes from the environment.
    let pad = env!("CARGO_BIN_EXE_pad");
    let script = format!("{pad} guard -- touch {}", ran.display());
    let out = s.pad_output(["run", &r, "--holder", "ci-8", "--", "sh", "-c", &script]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(ran.exists(), "ran under pad run's lease");
}

/// A lease broken while a guarded command runs stops it (exit 7), and the
/// command saw SIGTERM.
#[test]
fn guard_stops_its_command_when_the_lease_is_lost() {
    let s = TestServer::start();
    let r = create(&s, "deploy");
    let lease = claim(&s, &r, "ci-7", "6s");
    let id = lease["lease"]["lease_id"].as_i64().unwrap().to_string();
    let (flag, up) = (s.home.join("term"), s.home.join("up"));
    let script = format!(
        "trap 'echo term > {}; exit 0' TERM; touch {}; while true; do sleep 0.05; done",
        flag.display(),
        up.display()
    );
    let guard = s
        .pad()
        .args([
            "guard",
            "--ref",
            &r,
            "--lease-id",
            &id,
            "--holder",
            "ci-7",
            "--kill-after",
            "1s",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Break the lease once the command runs (it says so), not after a guess.
    wait_for("the command to start", Duration::from_secs(30), || up.exists());
    let broke = s.pad_output(["item", "release", &r, "--force", "--reason", "deploy freeze"]);
    assert!(broke.status.success(), "{}", stderr(&broke));
    let out = guard.wait_with_output().unwrap();
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    assert!(stderr(&out).contains("deploy freeze"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&flag).unwrap_or_default().trim(), "term");
}

/// The epoch as a fencing token: a sink that keeps the highest epoch it has
/// seen per item refuses a writer whose lease has since passed to another
/// (docs/leases.md, "pad guard"). Worker A's lease (epoch 1) runs out; B
/// takes the item (epoch 2) and writes; A's late write is refused by the
/// guard, and by the sink itself when A skips the guard.
#[test]
fn a_fenced_sink_refuses_a_stale_epoch() {
    let s = TestServer::start();
    let r = create(&s, "write the release notes");
    let dir = s.home.join("sink");
    std::fs::create_dir(&dir).unwrap();
    // The sink: `sink REF EPOCH DATA` appends DATA unless a higher epoch wrote before.
    let sink = dir.join("sink.sh");
    std::fs::write(
        &sink,
        format!(
            "exec 9>{d}/lock; flock 9\nlast=$(cat {d}/$1.epoch 2>/dev/null || echo 0)\n\
             if [ \"$2\" -lt \"$last\" ]; then echo \"stale epoch $2 < $last\" >&2; exit 1; fi\n\
             echo \"$2\" > {d}/$1.epoch; echo \"$2 $3\" >> {d}/$1.log\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let sink = sink.to_str().unwrap();
    let a = claim(&s, &r, "worker-a", "1s");
    let (a_id, a_epoch) = (a["lease"]["lease_id"].as_i64().unwrap().to_string(), a["lease"]["epoch"].as_i64().unwrap());
    std::thread::sleep(Duration::from_millis(1200));
    let b = claim(&s, &r, "worker-b", "60s");
    let (b_id, b_epoch) = (b["lease"]["lease_id"].as_i64().unwrap().to_string(), b["lease"]["epoch"].as_i64().unwrap());
    assert!(b_epoch > a_epoch);
    let write = |id: &str, holder: &str, epoch: i64, data: &str| {
        s.pad()
            .args([
                "guard",
                "--ref",
                &r,
                "--lease-id",
                id,
                "--holder",
                holder,
                "--",
                "sh",
                sink,
                &r,
                &epoch.to_string(),
                data,
            ])
            .output()
            .unwrap()
    };
    let out = write(&b_id, "worker-b", b_epoch, "from-b");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let late = write(&a_id, "worker-a", a_epoch, "from-a");
    assert_eq!(code(&late), 7, "the guard refuses A: {}", stderr(&late));
    // Without the guard, the sink itself refuses the stale epoch.
    let bypass = std::process::Command::new("sh").args([sink, &r, &a_epoch.to_string(), "from-a"]).output().unwrap();
    assert_eq!(code(&bypass), 1, "{}", stderr(&bypass));
    assert!(stderr(&bypass).contains("stale epoch"));
    let log = std::fs::read_to_string(dir.join(format!("{r}.log"))).unwrap();
    assert_eq!(log.trim(), format!("{b_epoch} from-b"), "only the live holder's write landed");
}

/// `pad guard --ref R --lease-id N [ARGS…] -- touch FILE`, with no
/// `PAD_HOLDER` in its environment: whether it ran is whether FILE exists.
fn guard_touch(s: &TestServer, r: &str, id: &str, args: &[&str], file: &Path) -> Output {
    s.pad()
        .env_remove("PAD_HOLDER")
        .env_remove("PAD_KILL_AFTER")
        .args(["guard", "--ref", r, "--lease-id", id])
        .args(args)
        .args(["--", "touch", file.to_str().unwrap()])
        .output()
        .unwrap()
}

/// A lease whose TTL leaves the guard's `--kill-after` no room to renew
/// (docs/leases.md, S2) is refused as `pad run` refuses it: exit 2, the rule
/// in words, CMD not run (before, CMD ran and was stopped ~2 s in as if the
/// lease were lost). With room to renew it runs.
#[test]
fn guard_refuses_a_lease_that_leaves_its_kill_after_no_room_to_renew() {
    let s = TestServer::start();
    let r = create(&s, "tag the release");
    let lease = claim(&s, &r, "ci-7", "12s");
    let id = lease["lease"]["lease_id"].as_i64().unwrap().to_string();
    let ran = s.home.join("ran");

    // The default --kill-after is 10 s: SIGTERM would be due 1.75 s in,
    // before the first renewal (at 4 s).
    let out = guard_touch(&s, &r, &id, &["--holder", "ci-7"], &ran);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("no room to renew") && said.contains("--kill-after"), "{said}");
    assert!(said.contains("`touch` was not run"), "{said}");
    assert!(!ran.exists(), "nothing ran");

    let out = guard_touch(&s, &r, &id, &["--holder", "ci-7", "--kill-after", "1s"], &ran);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(ran.exists(), "ran with room to renew");
}

/// `--min-left` is the lease's time left on the server's clock, not the
/// time before S2 would stop CMD: a 60 s lease has 60 s left, so
/// `--min-left 55s` runs and `--min-left 61s` does not.
#[test]
fn guard_min_left_is_the_leases_time_left() {
    let s = TestServer::start();
    let r = create(&s, "deploy to staging");
    let lease = claim(&s, &r, "ci-7", "60s");
    let id = lease["lease"]["lease_id"].as_i64().unwrap().to_string();
    let ran = s.home.join("ran");

    let out = guard_touch(&s, &r, &id, &["--holder", "ci-7", "--min-left", "61s"], &ran);
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    assert!(stderr(&out).contains("--min-left") && stderr(&out).contains("was not run"), "{}", stderr(&out));
    assert!(!ran.exists(), "nothing ran with less than --min-left left");

    let out = guard_touch(&s, &r, &id, &["--holder", "ci-7", "--min-left", "55s"], &ran);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(ran.exists(), "ran with 60 s left of the 55 s asked");
}

/// Given `--ref` and `--lease-id` alone, the guard works for a lease claimed
/// under another holder label than the caller's email: the holder is the
/// live lease's at that handle. A handle that is not the live lease's still
/// runs nothing.
#[test]
fn guard_takes_the_holder_from_the_live_lease_at_its_handle() {
    let s = TestServer::start();
    let r = create(&s, "open the pull request");
    let lease = claim(&s, &r, "ci-7", "60s");
    let id = lease["lease"]["lease_id"].as_i64().unwrap();
    let ran = s.home.join("ran");

    let out = guard_touch(&s, &r, &id.to_string(), &[], &ran);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(ran.exists(), "ran under ci-7's live lease");
    std::fs::remove_file(&ran).unwrap();

    let out = guard_touch(&s, &r, &(id + 1000).to_string(), &[], &ran);
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    assert!(stderr(&out).contains("was not run"), "{}", stderr(&out));
    assert!(!ran.exists(), "nothing ran at another handle");

    // Released: no live lease to take a holder from; nothing runs.
    let released = s.pad_output(["item", "release", &r, "--holder", "ci-7"]);
    assert!(released.status.success(), "{}", stderr(&released));
    let out = guard_touch(&s, &r, &id.to_string(), &[], &ran);
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    assert!(!ran.exists(), "nothing ran once the lease was released");
}

/// Inside `pad run`, `pad guard` reaches the supervisor's server as the
/// supervisor's caller, however the supervisor was pointed there: a profile
/// (`--profile alt`), or `--url` with `PAD_TOKEN`. The `default` profile
/// names a server that is not there, so a guard that fell back on it would
/// exit 8. A profile's token is not copied into CMD's environment.
#[test]
fn guard_inside_pad_run_reaches_the_supervisors_server() {
    let s = TestServer::start();
    let r = create(&s, "push the branch");
    let credentials = s.home.join("credentials.toml");
    std::fs::write(
        &credentials,
        format!(
            "[profiles.default]\nurl = \"http://127.0.0.1:9\"\ntoken = \"not-this-one\"\n\n\
             [profiles.alt]\nurl = \"{}\"\ntoken = \"{}\"\n",
            s.url, s.token
        ),
    )
    .unwrap();
    let pad = env!("CARGO_BIN_EXE_pad");
    let (ran, seen) = (s.home.join("ran"), s.home.join("env"));
    let script = format!(
        "echo \"${{PAD_PROFILE-}} ${{PAD_TOKEN-none}}\" > {}; {pad} guard -- touch {}",
        seen.display(),
        ran.display()
    );
    let run = |cmd: &mut std::process::Command| {
        cmd.env_remove("PAD_HOLDER")
            .args(["run", &r, "--holder", "ci-7", "--ttl", "60s", "--", "sh", "-c", &script])
            .output()
            .unwrap()
    };

    let out = run(s.pad().args(["--profile", "alt"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(ran.exists(), "the guard ran CMD through profile `alt`");
    assert_eq!(std::fs::read_to_string(&seen).unwrap().trim(), "alt none", "the profile, not its token");
    std::fs::remove_file(&ran).unwrap();

    let out = run(s.pad().env("PAD_TOKEN", &s.token).args(["--url", &s.url]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(ran.exists(), "the guard ran CMD through --url and PAD_TOKEN");
    assert!(!stderr(&out).contains(&s.token), "the token is never printed");
}
