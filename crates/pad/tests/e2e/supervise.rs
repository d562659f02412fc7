//! S1 (docs/leases.md): a process pad starts under a lease never outlives
//! it. Real `pad serve`, real `pad run`/`pad drain` processes, liveness read
//! from /proc. Also `--timeout`, `--exit-code-map`, the JSON lines and the
//! refusals of bad limits.

use crate::common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::cli::{code, create, show, stderr, stdout, wait_for};
use common::server::TestServer;
use serde_json::Value;

/// Whether `pid` is a live process (a zombie is dead: it runs nothing).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Live processes whose command line contains `needle` (the guard is a fork
/// of pad, so it carries pad's command line).
fn processes_with(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        if String::from_utf8_lossy(&cmdline).contains(needle) && alive(pid) {
            found.push(pid);
        }
    }
    found
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn spawn(s: &TestServer, args: &[&str]) -> Child {
    s.pad().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// A CMD that starts a grandchild and writes both pids; `ignore_term` makes
/// both ignore SIGTERM, so only SIGKILL stops them.
fn family_script(dir: &Path, ignore_term: bool) -> String {
    let trap = if ignore_term { "trap '' TERM; " } else { "" };
    format!(
        "{trap}sleep 300 & echo $! > {gc}.tmp; mv {gc}.tmp {gc}; echo $$ > {c}.tmp; mv {c}.tmp {c}; wait",
        gc = dir.join("grandchild").display(),
        c = dir.join("child").display()
    )
}

/// `kill -9` of the supervisor: the guard stops CMD and its grandchild at
/// once (SIGTERM), or after `--kill-after` when they ignore SIGTERM; the
/// lease (30 s) is far from expiring by then.
fn supervisor_death_stops_the_family(ignore_term: bool) {
    let s = TestServer::start();
    let r = create(&s, "orphan risk");
    let dir = s.home.join(if ignore_term { "stubborn" } else { "plain" });
    std::fs::create_dir(&dir).unwrap();
    let holder = format!("s1-{:08x}", rand::random::<u32>());
    let script = family_script(&dir, ignore_term);
    let mut run =
        spawn(&s, &["run", &r, "--holder", &holder, "--ttl", "30s", "--kill-after", "1s", "--", "sh", "-c", &script]);
    wait_for("both pids", Duration::from_secs(30), || dir.join("child").exists() && dir.join("grandchild").exists());
    let (child, grandchild) = (read_pid(&dir.join("child")).unwrap(), read_pid(&dir.join("grandchild")).unwrap());
    assert!(alive(child) && alive(grandchild));
    let guards = processes_with(&holder);
    assert_eq!(guards.len(), 2, "pad and its guard: {guards:?}");

    run.kill().unwrap(); // SIGKILL: pad gets no say
    run.wait().unwrap();
    let killed = Instant::now();
    // Left alone the family sleeps 300 s, and the lease stopping nobody, only
    // the guard can stop it; the lease still being live afterwards shows it
    // did so well within the TTL. The time is printed, not bounded: a loaded
    // machine schedules the guard late.
    wait_for("CMD and its grandchild to die", Duration::from_secs(25), || !alive(child) && !alive(grandchild));
    eprintln!("family stopped {:?} after the supervisor's kill -9", killed.elapsed());
    wait_for("the guard to exit", Duration::from_secs(25), || processes_with(&holder).is_empty());
    let lease = &show(&s, &r)["lease"];
    assert_eq!(lease["holder"], holder.as_str(), "the lease is still live, and nobody else's: {lease}");
}

#[test]
fn kill_9_of_pad_run_stops_cmd_and_grandchild() {
    supervisor_death_stops_the_family(false);
}

#[test]
fn kill_9_of_pad_run_kills_a_family_that_ignores_sigterm() {
    supervisor_death_stops_the_family(true);
}

/// The process group `pid` leads or belongs to, from /proc (field 5 of
/// `stat`, after the parenthesised command name).
fn pgrp(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(2)?.parse().ok()
}

/// Live processes (zombies aside) in any of `groups`.
fn in_groups(groups: &[u32]) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| alive(pid) && pgrp(pid).is_some_and(|g| groups.contains(&g)))
        .collect()
}

/// `kill -9` of a drain running three jobs: every job's process group —
/// CMD, its grandchild — is gone soon after (each job's guard stops its
/// own group), ignoring SIGTERM or not, with the leases still live.
fn drain_jobs_death_stops_every_group(ignore_term: bool) {
    let s = TestServer::start();
    let refs: Vec<String> = (0..3).map(|i| create(&s, &format!("job {i}"))).collect();
    let dir = s.home.join("jobs");
    std::fs::create_dir(&dir).unwrap();
    let trap = if ignore_term { "trap '' TERM; " } else { "" };
    let script = format!(
        "{trap}d={d}/$PAD_REF; mkdir $d; sleep 300 & echo $! > $d/gc.tmp; mv $d/gc.tmp $d/gc; \
         echo $$ > $d/c.tmp; mv $d/c.tmp $d/c; wait",
        d = dir.display()
    );
    let mut drain = spawn(
        &s,
        &[
            "drain",
            "--jobs",
            "3",
            "--ttl",
            "30s",
            "--kill-after",
            "1s",
            "--holder",
            "jobs-s1",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    let ready = |r: &String| dir.join(r).join("c").exists() && dir.join(r).join("gc").exists();
    wait_for("three jobs and their grandchildren", Duration::from_secs(20), || refs.iter().all(ready));
    let groups: Vec<u32> = refs.iter().map(|r| read_pid(&dir.join(r).join("c")).unwrap()).collect();
    for (r, g) in refs.iter().zip(&groups) {
        let gc = read_pid(&dir.join(r).join("gc")).unwrap();
        assert_eq!((pgrp(*g), pgrp(gc)), (Some(*g), Some(*g)), "{r}: CMD leads its own group, with its grandchild");
    }
    assert_eq!(in_groups(&groups).len(), 6, "three CMDs and three grandchildren");

    drain.kill().unwrap(); // SIGKILL: pad gets no say
    drain.wait().unwrap();
    let killed = Instant::now();
    // Within the 30 s leases, checked below; the time is printed, not
    // bounded more tightly: a loaded machine schedules the guards late.
    wait_for("every job's process group to be gone", Duration::from_secs(20), || in_groups(&groups).is_empty());
    eprintln!("3 job groups gone {:?} after the drain's kill -9", killed.elapsed());
    for r in &refs {
        assert_eq!(show(&s, r)["lease"]["holder"], "jobs-s1", "{r}: the lease is still live, nobody else's");
    }
}

#[test]
fn kill_9_of_a_drain_with_jobs_stops_every_job_group() {
    drain_jobs_death_stops_every_group(false);
}

#[test]
fn kill_9_of_a_drain_with_jobs_kills_groups_that_ignore_sigterm() {
    drain_jobs_death_stops_every_group(true);
}

#[test]
fn a_lost_lease_stops_the_whole_group_and_leftovers_are_stopped_at_exit() {
    let s = TestServer::start();
    let r = create(&s, "stuck job");
    let dir = s.home.join("lost");
    std::fs::create_dir(&dir).unwrap();
    let script = family_script(&dir, false);
    let run =
        spawn(&s, &["run", &r, "--holder", "runner-a", "--ttl", "6s", "--kill-after", "1s", "--", "sh", "-c", &script]);
    wait_for("both pids", Duration::from_secs(30), || dir.join("grandchild").exists() && dir.join("child").exists());
    let grandchild = read_pid(&dir.join("grandchild")).unwrap();
    let broke = s.pad_output(["item", "release", &r, "--force", "--reason", "stuck for hours"]);
    assert!(broke.status.success(), "{}", stderr(&broke));
    let out = run.wait_with_output().unwrap();
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    assert!(stderr(&out).contains("lost"), "{}", stderr(&out));
    assert!(!alive(grandchild), "the grandchild went with the group");

    // CMD exits but leaves a background process: stopped before release.
    let free = create(&s, "leaves a daemon");
    let pidfile = s.home.join("daemon.pid");
    let script = format!("sleep 300 & echo $! > {}", pidfile.display());
    let out = s.pad_output(["run", &free, "--", "sh", "-c", &script]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("left processes"), "{}", stderr(&out));
    assert!(!alive(read_pid(&pidfile).unwrap()), "no leftover outlives the lease");
}

#[test]
fn timeout_stops_a_hung_command_and_exits_124() {
    let s = TestServer::start();
    let r = create(&s, "hangs");
    let started = Instant::now();
    let out = s.pad_output([
        "run",
        &r,
        "--timeout",
        "1s",
        "--kill-after",
        "1s",
        "--format",
        "json",
        "--",
        "sh",
        "-c",
        "trap '' TERM; sleep 60",
    ]);
    let took = started.elapsed();
    assert_eq!(code(&out), 124, "{}", stderr(&out));
    // Exit 137 below says SIGKILL ended CMD, not its own end 60 s later.
    eprintln!("stopped {took:?} after the start (timeout 1 s + kill-after 1 s)");
    let lines: Vec<Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "an item line and a summary: {lines:?}");
    assert_eq!(lines[0]["ref"], r.as_str());
    assert_eq!(lines[0]["outcome"], "timed_out");
    assert_eq!(lines[0]["epoch"], 1);
    assert_eq!(lines[0]["exit_code"], 137, "SIGKILL after the ignored SIGTERM");
    assert!(lines[0]["seconds"].as_f64().unwrap() >= 2.0);
    assert_eq!((lines[1]["summary"].as_bool(), lines[1]["timed_out"].as_u64()), (Some(true), Some(1)));
    assert!(show(&s, &r).get("lease").is_none(), "the lease ended");
}

#[test]
fn exit_codes_pad_reserves_are_flagged_and_can_be_mapped() {
    let s = TestServer::start();
    let r = create(&s, "exits 7");
    let out = s.pad_output(["run", &r, "--", "sh", "-c", "exit 7"]);
    assert_eq!(code(&out), 7);
    assert!(stderr(&out).contains("itself exited 7"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--exit-code-map 7="), "{}", stderr(&out));

    let out = s.pad_output(["run", &r, "--exit-code-map", "7=107,3=103", "--", "sh", "-c", "exit 7"]);
    assert_eq!(code(&out), 107, "{}", stderr(&out));
    assert!(!stderr(&out).contains("itself exited"), "{}", stderr(&out));
    let out = s.pad_output(["run", &r, "--exit-code-map", "7=107", "--", "sh", "-c", "exit 9"]);
    assert_eq!(code(&out), 9, "unmapped codes pass through");

    for bad in [
        &["run", &r, "--exit-code-map", "7=8", "--", "true"][..],
        &["run", &r, "--exit-code-map", "7", "--", "true"],
        &["run", &r, "--exit-code-map", "0=9", "--", "true"],
        &["run", &r, "--timeout", "0s", "--", "true"],
        &["drain", "--timeout", "0s", "--", "true"],
        &["drain", "--max-attempts", "0", "--", "true"],
        &["run", &r, "--timeout", "30", "--", "true"],
    ] {
        let out = s.pad_output(bad);
        assert_eq!(code(&out), 2, "{bad:?}: {}", stderr(&out));
    }
    let help = s.pad_output(["run", "--help"]);
    assert!(stdout(&help).contains("Exit codes:") && stdout(&help).contains("124"), "{}", stdout(&help));
}

#[test]
fn drain_json_prints_a_line_per_item_and_a_summary() {
    let s = TestServer::start();
    let refs: Vec<String> = (0..3).map(|i| create(&s, &format!("item {i}"))).collect();
    let script = format!("case $PAD_REF in {}) exit 3;; esac; echo worked on $PAD_REF", refs[1]);
    let out = s.pad_output(["drain", "--done-on-success", "--format", "json", "--", "sh", "-c", &script]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // Stdout is pad's JSON lines alone; CMD's output went to stderr.
    let lines: Vec<Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(stderr(&out).contains(&format!("worked on {}", refs[2])), "{}", stderr(&out));
    assert_eq!(lines.len(), 4, "{}", stdout(&out));
    let outcomes: Vec<(&str, &str, i64)> = lines[..3]
        .iter()
        .map(|l| (l["ref"].as_str().unwrap(), l["outcome"].as_str().unwrap(), l["exit_code"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        outcomes,
        [(refs[0].as_str(), "succeeded", 0), (refs[1].as_str(), "failed", 3), (refs[2].as_str(), "succeeded", 0)]
    );
    assert_eq!(lines[0]["status"], "done");
    let summary = &lines[3];
    assert_eq!(
        (summary["items"].as_u64(), summary["succeeded"].as_u64(), summary["failed"].as_u64()),
        (Some(3), Some(2), Some(1)),
        "{summary}"
    );
    assert_eq!(show(&s, &refs[1])["status"], "open");
}

#[test]
fn sigterm_to_pad_stops_a_stubborn_group_after_kill_after_and_releases() {
    let s = TestServer::start();
    let r = create(&s, "stubborn");
    let dir = s.home.join("term");
    std::fs::create_dir(&dir).unwrap();
    let script = family_script(&dir, true);
    let run = spawn(&s, &["run", &r, "--ttl", "1m", "--kill-after", "1s", "--", "sh", "-c", &script]);
    wait_for("both pids", Duration::from_secs(30), || dir.join("child").exists() && dir.join("grandchild").exists());
    let (child, grandchild) = (read_pid(&dir.join("child")).unwrap(), read_pid(&dir.join("grandchild")).unwrap());
    let ok = std::process::Command::new("kill").args(["-TERM", &run.id().to_string()]).status().unwrap();
    assert!(ok.success());
    let sent = Instant::now();
    let out = run.wait_with_output().unwrap();
    assert_eq!(code(&out), 143, "128 + SIGTERM: {}", stderr(&out));
    let took = sent.elapsed();
    // Not before --kill-after; the family would sleep 300 s, so its being
    // gone below is the proof of the SIGKILL (the time is printed).
    assert!(took >= Duration::from_millis(900), "SIGKILL before --kill-after: {took:?}");
    eprintln!("the stubborn group was stopped {took:?} after SIGTERM to pad (kill-after 1 s)");
    assert!(!alive(child) && !alive(grandchild), "the whole group is gone");
    assert!(stderr(&out).contains("interrupted by SIGTERM"), "{}", stderr(&out));
    let item = show(&s, &r);
    assert!(item.get("lease").is_none(), "released: {item}");
    assert_eq!(item["status"], "open");
}

/// Nanosecond wall-clock timestamps a command wrote (`date +%s%N`), one a line.
fn stamps(path: &Path) -> Vec<i128> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// S2 (docs/leases.md, "S2: the holder stops first"): the SIGKILL deadline
/// set when stopping began holds though CMD exits first. The server is frozen
/// (SIGSTOP), so no renewal gets through and S2 stops CMD; CMD traps SIGTERM
/// and exits 1.5 s later, while its child ignores SIGTERM and writes a
/// timestamp every 20 ms. Waiting a fresh `--kill-after` from CMD's exit would
/// let the child write past the lease's expiry.
#[test]
fn a_stop_under_way_keeps_its_sigkill_deadline_when_cmd_exits_first() {
    let s = TestServer::start();
    let r = create(&s, "leader exits first");
    let dir = s.home.join("leader");
    std::fs::create_dir(&dir).unwrap();
    let (ticks, term, child_pid) = (dir.join("ticks"), dir.join("term"), dir.join("child"));
    let script = format!(
        "(trap '' TERM; while :; do date +%s%N >> {ticks}; sleep 0.02; done) & \
         echo $! > {c}.tmp; mv {c}.tmp {c}; \
         trap 'date +%s%N > {term}.tmp; mv {term}.tmp {term}; sleep 1.5; exit 1' TERM; \
         while :; do sleep 0.1; done",
        ticks = ticks.display(),
        c = child_pid.display(),
        term = term.display()
    );
    let (ttl, kill_after) = (Duration::from_secs(6), Duration::from_secs(2));
    let run = spawn(&s, &["run", &r, "--ttl", "6s", "--kill-after", "2s", "--", "sh", "-c", &script]);
    wait_for("the child's first timestamp", Duration::from_secs(30), || {
        child_pid.exists() && !stamps(&ticks).is_empty()
    });
    let child = read_pid(&child_pid).unwrap();
    // SAFETY: kill(2) on the server this test started.
    let freeze = |sig| assert_eq!(unsafe { libc::kill(s.pid(), sig) }, 0);
    freeze(libc::SIGSTOP);
    let frozen = Instant::now();
    let out = run.wait_with_output().unwrap();
    // Thawed only once the lease has surely expired (its last renewal was
    // sent before the freeze), so no renewal sent before can extend it.
    std::thread::sleep((frozen + ttl + Duration::from_secs(1)).saturating_duration_since(Instant::now()));
    freeze(libc::SIGCONT);
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    assert!(stderr(&out).contains("lost"), "{}", stderr(&out));
    assert!(!alive(child), "pad exited with the child still running");

    let last = &show(&s, &r)["last_lease"];
    assert_eq!(last["ended"], "expired", "{last}");
    let expiry = chrono::DateTime::parse_from_rfc3339(last["ended_at"].as_str().unwrap()).unwrap();
    let expiry = i128::from(expiry.timestamp_nanos_opt().unwrap());
    let term_at = stamps(&term).first().copied().expect("CMD got SIGTERM");
    let last_tick = *stamps(&ticks).iter().max().unwrap();
    let ms = |ns: i128| ns as f64 / 1e6;
    eprintln!(
        "SIGTERM at expiry {:+.0} ms; the child's last timestamp at SIGTERM {:+.0} ms, at expiry {:+.0} ms",
        ms(term_at - expiry),
        ms(last_tick - term_at),
        ms(last_tick - expiry)
    );
    // SIGKILL was due `kill_after` after SIGTERM (CMD noted SIGTERM no
    // earlier than it was sent); S2's margin is what its delivery may take.
    let due = term_at + (kill_after + pad_core::stop::margin(ttl)).as_nanos() as i128;
    assert!(
        last_tick < due,
        "the child wrote {:.0} ms after kill-after had passed since SIGTERM",
        ms(last_tick - term_at) - kill_after.as_millis() as f64
    );
    assert!(last_tick < expiry, "the child wrote {:.0} ms after the lease expired", ms(last_tick - expiry));
}
