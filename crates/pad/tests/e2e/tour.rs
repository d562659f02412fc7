//! "Serve and drive it": the real `pad serve` driven by the real `pad`
//! binary, as a person would in a terminal (docs/leases.md, README.md).

use crate::common;

use std::process::{Command, Output};

use common::server::TestServer;
use serde_json::Value;

/// stdout of a command that must succeed.
fn ok(out: &Output) -> String {
    assert!(out.status.success(), "exit {:?}, stderr: {}", out.status.code(), text(&out.stderr));
    text(&out.stdout)
}

/// stderr of a command that must exit with `code`.
fn fails(out: &Output, code: i32) -> String {
    assert_eq!(out.status.code(), Some(code), "stdout: {}\nstderr: {}", text(&out.stdout), text(&out.stderr));
    text(&out.stderr)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

fn json(out: &Output) -> Value {
    serde_json::from_str(&ok(out)).expect("JSON on stdout")
}

fn assert_plain(s: &str) {
    assert!(!s.contains('\x1b'), "ANSI escape in {s:?}");
}

#[test]
fn tour_create_claim_contend_show_list_release() {
    let s = TestServer::start();
    assert_eq!(ok(&s.pad_output(["item", "create", "Write the tour"])), "TASK-1\n");
    assert_eq!(ok(&s.pad_output(["item", "create", "Nobody works on this"])), "TASK-2\n");

    // Claim: the lease with holder and expiry.
    let claimed = ok(&s.pad_output(["item", "claim", "TASK-1", "--holder", "runner-a"]));
    assert!(claimed.starts_with("Claimed TASK-1: runner-a, epoch 1, lease 1, expires "), "{claimed}");
    let expires = claimed.split_whitespace().nth(8).expect("an expiry").to_string();
    assert!(expires.ends_with('Z') && claimed.contains("(in 15m)"), "{claimed}");

    // Contention: exit 7, naming the winner and when the lease ends (L2).
    let lost = fails(&s.pad_output(["item", "claim", "TASK-1", "--holder", "runner-b"]), 7);
    assert!(lost.contains("runner-a") && lost.contains(&expires), "{lost}");

    // Show: the Lease line right under Assigned.
    let show = ok(&s.pad_output(["item", "show", "TASK-1"]));
    let lines: Vec<&str> = show.lines().collect();
    let assigned = lines.iter().position(|l| l.starts_with("Assigned:")).expect("an Assigned line");
    let lease = lines[assigned + 1];
    assert!(
        lease.starts_with(&format!("Lease:    runner-a, expires {expires} (in ")) && lease.ends_with(')'),
        "{show}"
    );
    assert!(!ok(&s.pad_output(["item", "show", "TASK-2"])).contains("Lease:"));

    // List: stdout is a pipe, so plain TAB-separated fields (README.md,
    // "Tables for people and scripts"): no header, marker or colour; the leased row names its holder.
    let list = ok(&s.pad_output(["item", "list"]));
    assert_plain(&list);
    let row = |r: &str| list.lines().find(|l| l.contains(r)).unwrap_or_else(|| panic!("{r} in {list}")).to_string();
    assert!(row("TASK-1").starts_with("TASK-1\topen\t") && row("TASK-1").contains("\trunner-a\t"), "{list}");
    assert!(row("TASK-2").starts_with("TASK-2\t"), "{list}");
    assert!(!list.contains('»') && !list.contains("REF"), "{list}");

    // JSON carries the lease object on show and list, and no key when unleased.
    let item = json(&s.pad_output(["item", "show", "TASK-1", "--format", "json"]));
    assert_eq!((item["lease"]["holder"].as_str(), item["lease"]["epoch"].as_i64()), (Some("runner-a"), Some(1)));
    let page = json(&s.pad_output(["item", "list", "--format", "json"]));
    let by_ref = |r: &str| page["items"].as_array().unwrap().iter().find(|i| i["ref"] == r).cloned().unwrap();
    assert_eq!(by_ref("TASK-1")["lease"]["holder"], "runner-a");
    assert!(by_ref("TASK-2").get("lease").is_none(), "{page}");

    // Release is idempotent (L6), and frees the item for another worker.
    assert_eq!(ok(&s.pad_output(["item", "release", "TASK-1", "--holder", "runner-a"])), "Lease released\n");
    assert_eq!(ok(&s.pad_output(["item", "release", "TASK-1", "--holder", "runner-a"])), "No live lease\n");
    let b = ok(&s.pad_output(["item", "claim", "TASK-1", "--holder", "runner-b"]));
    assert!(b.starts_with("Claimed TASK-1: runner-b, epoch 2, "), "{b}");
}

/// L5: a crashed holder (nothing running, no release) frees the item at
/// `expires_at`. Its own test so the sleep overlaps the others.
#[test]
fn an_expired_lease_is_claimable_with_nothing_running() {
    let s = TestServer::start();
    ok(&s.pad_output(["item", "create", "Crashy job"]));
    ok(&s.pad_output(["item", "claim", "TASK-1", "--holder", "runner-a", "--ttl", "5s"]));
    fails(&s.pad_output(["item", "claim", "TASK-1", "--holder", "runner-b"]), 7);
    std::thread::sleep(std::time::Duration::from_secs(6));
    let b = ok(&s.pad_output(["item", "claim", "TASK-1", "--holder", "runner-b"]));
    assert!(b.starts_with("Claimed TASK-1: runner-b, epoch 2, "), "{b}");
}

#[test]
fn exit_codes_for_auth_config_usage_and_not_found() {
    let s = TestServer::start();
    ok(&s.pad_output(["item", "create", "Something"]));

    // A PAD_TOKEN the server refuses never falls back to the stored profile.
    let refused = fails(&s.pad().env("PAD_TOKEN", "pad_not-a-real-token").args(["item", "list"]).output().unwrap(), 4);
    assert!(refused.contains("PAD_TOKEN"), "{refused}");

    // No profile and no token: a configuration error, before any request.
    let empty = tempfile::tempdir().unwrap();
    let none = s.pad().env("PAD_HOME", empty.path()).env("PAD_URL", &s.url).args(["item", "list"]).output().unwrap();
    assert!(fails(&none, 3).contains("pad auth login"));

    // TTL spellings (L8): a unit is required, and only one spelling at a time.
    fails(&s.pad_output(["item", "claim", "TASK-1", "--ttl", "30"]), 2);
    fails(&s.pad_output(["item", "claim", "TASK-1", "--ttl", "1m", "--ttl-minutes", "2"]), 2);

    fails(&s.pad_output(["item", "show", "TASK-99"]), 5);

    // A viewer may read but not lease.
    ok(&s.pad_output(["member", "add", "v@x", "--role", "viewer"]));
    let token = ok(&s.pad_output(["token", "create", "t", "--email", "v@x"])).trim().to_string();
    let viewer = || {
        let mut cmd = s.pad();
        cmd.env("PAD_TOKEN", &token);
        cmd
    };
    assert!(ok(&viewer().args(["item", "list"]).output().unwrap()).contains("TASK-1"));
    fails(&viewer().args(["item", "claim", "TASK-1"]).output().unwrap(), 4);
}

/// README.md: a closed pipe is not an error. The listing is larger than a pipe
/// buffer, so `pad` is still writing when `head` exits.
#[test]
fn a_closed_pipe_is_not_an_error() {
    const ITEMS: usize = 250;
    let s = TestServer::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = pad_client::Client::new(s.url.parse().unwrap(), &s.token).unwrap();
        let long_title = "x".repeat(480);
        // A few writers at once; SQLite serializes them anyway.
        let writers = (0..5).map(|w| {
            let (client, title) = (client.clone(), long_title.clone());
            tokio::spawn(async move {
                for n in (w..ITEMS).step_by(5) {
                    let item = pad_core::NewItem { title: format!("{n} {title}"), ..Default::default() };
                    client.create_item("default", &item).await.unwrap();
                }
            })
        });
        for w in writers.collect::<Vec<_>>() {
            w.await.unwrap();
        }
    });

    let pipeline = format!("set -o pipefail; {:?} item list --limit 500 | head -1", env!("CARGO_BIN_EXE_pad"));
    let out = with_env_of(&s, Command::new("bash")).args(["-c", &pipeline]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    assert!(text(&out.stdout).starts_with("TASK-") && text(&out.stdout).contains('\t'), "{}", text(&out.stdout));
}

/// `cmd` with the environment and directory `TestServer::pad()` gives `pad`.
fn with_env_of(s: &TestServer, mut cmd: Command) -> Command {
    let pad = s.pad();
    for (k, v) in pad.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    if let Some(dir) = pad.get_current_dir() {
        cmd.current_dir(dir);
    }
    cmd
}

/// README.md: colour honours NO_COLOR and is off when stdout is not a
/// terminal. `script` gives `pad` a terminal, so the check can tell.
#[test]
fn colour_only_on_a_terminal_without_no_color() {
    let s = TestServer::start();
    ok(&s.pad_output(["item", "create", "Leased"]));
    ok(&s.pad_output(["item", "claim", "TASK-1"]));

    // A pipe, with and without NO_COLOR.
    assert_plain(&ok(&s.pad_output(["item", "list"])));
    assert_plain(&ok(&s.pad().env_remove("NO_COLOR").args(["item", "list"]).output().unwrap()));

    let on_terminal = |no_color: bool| {
        let line = format!("{:?} item list", env!("CARGO_BIN_EXE_pad"));
        let mut cmd = with_env_of(&s, Command::new("script"));
        if !no_color {
            cmd.env_remove("NO_COLOR");
        }
        ok(&cmd.args(["-qec", &line, "/dev/null"]).output().unwrap())
    };
    assert_plain(&on_terminal(true));
    let coloured = on_terminal(false);
    assert!(coloured.contains("\x1b[36m»\x1b[0m"), "{coloured:?}");
}

/// L14, L15, L17 from the CLI: `--no-refresh`, `fail` with a note that the
/// next claimant and `item show` see, `complete` by lease id, `--exclude`
/// and `--parent`.
#[test]
fn tour_fail_complete_exclude() {
    let s = TestServer::start();
    ok(&s.pad_output(["item", "create", "Flaky job"]));
    ok(&s.pad_output(["item", "create", "Child", "--parent", "TASK-1"]));
    let claimed = json(&s.pad_output(["--format", "json", "item", "claim", "TASK-1", "--holder", "w"]));
    let lease_id = claimed["lease"]["lease_id"].as_i64().expect("a lease id").to_string();
    fails(&s.pad_output(["item", "claim", "TASK-1", "--holder", "w", "--no-refresh"]), 7);
    // A stale epoch is refused and changes nothing; a handle is required.
    fails(&s.pad_output(["item", "fail", "TASK-1", "--holder", "w", "--epoch", "2"]), 7);
    fails(&s.pad_output(["item", "fail", "TASK-1", "--holder", "w"]), 2);
    let failed = ok(&s.pad_output(["item", "fail", "TASK-1", "--holder", "w", "--epoch", "1", "--note", "disk full"]));
    assert!(failed.starts_with("Failed TASK-1 (failure 1); retry after "), "{failed}");
    let show = ok(&s.pad_output(["item", "show", "TASK-1"]));
    assert!(show.contains("Last:     w failed at "), "{show}");
    assert!(show.contains("Note:     disk full\n") && show.contains("Failures: 1\n"), "{show}");
    assert!(show.contains("Retry at: "), "{show}");
    // Backing off: claim-next hands out the child only, and --exclude skips it.
    fails(&s.pad_output(["item", "claim-next", "--holder", "w", "--exclude", "TASK-2"]), 5);
    let next = json(&s.pad_output(["--format", "json", "item", "claim-next", "--holder", "w"]));
    assert_eq!(next["item"]["ref"], "TASK-2");
    let id = next["lease"]["lease_id"].as_i64().unwrap().to_string();
    fails(&s.pad_output(["item", "complete", "TASK-2", "--holder", "w", "--lease-id", &lease_id]), 7);
    let done = ok(&s.pad_output(["item", "complete", "TASK-2", "--holder", "w", "--lease-id", &id]));
    assert_eq!(done, "Completed TASK-2 (done); lease released\n");
    let children = json(&s.pad_output(["--format", "json", "item", "list", "--parent", "TASK-1", "--status", "all"]));
    assert_eq!(children["items"].as_array().unwrap().len(), 1);
    assert_eq!(children["items"][0]["status"], "done");
    // A claim by ref still works during the backoff, and sees the note.
    let again = ok(&s.pad_output(["item", "claim", "TASK-1", "--holder", "v"]));
    assert!(again.contains("Previous note from w: disk full"), "{again}");
}

/// README.md's tour, run verbatim on a terminal (`script`), prints what its
/// samples show, times aside: each `$ pad …` line of the `console` block is
/// run in turn, and its output is compared with the lines under it.
#[test]
fn the_readme_tour_prints_what_its_samples_show() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let tour = readme.split("## A tour in two terminals").nth(1).expect("the tour");
    let block = tour.split("```console\n").nth(1).and_then(|b| b.split("\n```").next()).expect("a console block");
    let mut steps: Vec<(String, Vec<String>)> = Vec::new();
    for line in block.lines() {
        match line.strip_prefix("$ ") {
            Some(command) => steps.push((command.to_string(), Vec::new())),
            None => steps.last_mut().expect("a command first").1.push(line.to_string()),
        }
    }
    // One shell on one terminal, as a person types it; a marker before each
    // step keeps `$?` for `echo $?`.
    let mut script = format!("pad() {{ {:?} \"$@\"; }}\n", env!("CARGO_BIN_EXE_pad"));
    for (n, (command, _)) in steps.iter().enumerate() {
        script.push_str(&format!("__rc=$?; echo '@@{n}'; (exit $__rc); {command}\n"));
    }
    let s = TestServer::start();
    let out = with_env_of(&s, Command::new("script"))
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .args(["-qec", &format!("bash -c {}", shell_quoted(&script)), "/dev/null"])
        .output()
        .unwrap();
    let printed = text(&out.stdout).replace('\r', "");
    for (n, (command, expected)) in steps.iter().enumerate() {
        let got = printed.split(&format!("@@{n}\n")).nth(1).unwrap_or_else(|| panic!("{printed}"));
        let got: Vec<String> = got.split("@@").next().unwrap().lines().map(without_times).collect();
        let expected: Vec<String> = expected.iter().map(|l| without_times(l)).collect();
        assert_eq!(got, expected, "$ {command}");
    }
}

fn shell_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A line with its times made `<TIME>` and its distances from now `<REL>`,
/// which differ from run to run.
fn without_times(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(c) = rest.chars().next() {
        let (masked, len) = match (time_at(rest), distance_at(rest)) {
            (Some(n), _) => ("<TIME>", n),
            (_, Some(n)) => ("<REL>", n),
            _ => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
                continue;
            }
        };
        out.push_str(masked);
        rest = &rest[len..];
    }
    out
}

/// The length of an RFC 3339 time in whole seconds at the start of `s`.
fn time_at(s: &str) -> Option<usize> {
    let shape = "dddd-dd-ddTdd:dd:ddZ";
    let fits = s.len() >= shape.len()
        && shape.bytes().zip(s.bytes()).all(|(p, c)| if p == b'd' { c.is_ascii_digit() } else { p == c });
    fits.then_some(shape.len())
}

/// The length of `just now`, `in 29m` or `5m ago` at the start of `s`.
fn distance_at(s: &str) -> Option<usize> {
    if s.starts_with("just now") {
        return Some("just now".len());
    }
    let amount = |t: &str| {
        let digits = t.bytes().take_while(u8::is_ascii_digit).count();
        (digits > 0 && t[digits..].starts_with(['s', 'm', 'h', 'd'])).then_some(digits + 1)
    };
    if let Some(t) = s.strip_prefix("in ") {
        return amount(t).map(|n| n + "in ".len());
    }
    amount(s).filter(|n| s[*n..].starts_with(" ago")).map(|n| n + " ago".len())
}
