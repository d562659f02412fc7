//! What a newcomer meets on the command line (README.md, "A tour in two
//! terminals"): times and deferrals in the forms people type, the lease
//! named in a claim's line, refusals that say what is wrong, and help that
//! describes every argument.

use crate::common;

use std::process::Output;

use chrono::{DateTime, Utc};
use common::server::TestServer;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ok(o: Output) -> Output {
    assert!(o.status.success(), "exit {:?}: {}{}", o.status.code(), stdout(&o), stderr(&o));
    o
}

fn not_before(server: &TestServer, r: &str) -> Option<DateTime<Utc>> {
    let out = ok(server.pad_output(["--format", "json", "item", "show", r]));
    let item: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    item["not_before"].as_str().map(|t| t.parse().unwrap())
}

/// `--not-before` takes a duration from now, a date (00:00 UTC) or an
/// RFC 3339 time, on create and update; anything else is refused at once.
#[test]
fn not_before_takes_durations_dates_and_times() {
    let server = TestServer::start();
    let before = Utc::now();
    let r = stdout(&ok(server.pad_output(["item", "create", "later", "--not-before", "2h"]))).trim().to_string();
    let at = not_before(&server, &r).expect("deferred");
    let after = Utc::now();
    let two_hours = chrono::Duration::hours(2);
    assert!(at >= before + two_hours - chrono::Duration::seconds(1) && at <= after + two_hours, "{at}");

    ok(server.pad_output(["item", "update", &r, "--not-before", "30m"]));
    let at = not_before(&server, &r).unwrap();
    assert!((at - Utc::now() - chrono::Duration::minutes(30)).num_seconds().abs() < 60, "{at}");

    ok(server.pad_output(["item", "update", &r, "--not-before", "2026-12-03"]));
    assert_eq!(not_before(&server, &r).unwrap().to_rfc3339(), "2026-12-03T00:00:00+00:00");

    ok(server.pad_output(["item", "update", &r, "--not-before", "2026-12-02T09:00:00+02:00"]));
    assert_eq!(not_before(&server, &r).unwrap().to_rfc3339(), "2026-12-02T07:00:00+00:00");

    for bad in ["30", "soon", "2026-13-01"] {
        let out = server.pad_output(["item", "update", &r, "--not-before", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(stderr(&out).contains("2h") && stderr(&out).contains("2026-12-03"), "{bad}: {}", stderr(&out));
    }
    let help = stdout(&ok(server.pad_output(["item", "create", "--help"])));
    assert!(help.contains("UTC"), "{help}");
}

/// A claim's line names its lease id, the handle `complete --lease-id`
/// takes; a lease id that is not the live lease's is said to not match
/// (naming the live one), never that the caller's lease was lost.
#[test]
fn claims_print_the_lease_id_and_a_wrong_one_is_a_mismatch_not_a_loss() {
    let server = TestServer::start();
    let r = stdout(&ok(server.pad_output(["item", "create", "one"]))).trim().to_string();
    let claimed = stdout(&ok(server.pad_output(["item", "claim", &r, "--holder", "runner-a"])));
    let json = ok(server.pad_output(["--format", "json", "item", "show", &r]));
    let item: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let lease_id = item["lease"]["lease_id"].as_i64().expect("a live lease");
    assert!(claimed.starts_with(&format!("Claimed {r}: runner-a, epoch 1, lease {lease_id}, expires ")), "{claimed}");

    let wrong = (lease_id + 100).to_string();
    let out = server.pad_output(["item", "complete", &r, "--holder", "runner-a", "--lease-id", &wrong]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(!said.contains("lost"), "{said}");
    assert!(said.contains(&format!("lease {wrong} does not match the live lease on {r}")), "{said}");
    assert!(said.contains(&format!("lease {lease_id}, epoch 1, held by runner-a")), "{said}");

    let r2 = stdout(&ok(server.pad_output(["item", "create", "two"]))).trim().to_string();
    let next = stdout(&ok(server.pad_output(["item", "claim-next", "--holder", "runner-b"])));
    let json = ok(server.pad_output(["--format", "json", "item", "show", &r2]));
    let item: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let id2 = item["lease"]["lease_id"].as_i64().expect("claim-next leased the open item");
    assert!(next.starts_with(&format!("Claimed {r2}: runner-b, epoch 1, lease {id2}, expires ")), "{next}");
}

/// `pad db backup bk/pad.db` into a folder that does not exist yet creates
/// the folder; one that cannot be created is named in the error.
#[test]
fn backup_into_a_missing_folder_creates_it() {
    let server = TestServer::start();
    ok(server.pad_output(["item", "create", "kept"]));
    let dir = server.home.parent().unwrap();
    let out = ok(server.pad_output(["db", "backup", "bk/nightly/pad.db"]));
    assert!(dir.join("bk/nightly/pad.db").is_file(), "{}", stdout(&out));

    std::fs::write(dir.join("plain-file"), "not a folder").unwrap();
    let out = server.pad_output(["db", "backup", "plain-file/pad.db"]);
    assert_ne!(out.status.code(), Some(0));
    let said = stderr(&out);
    assert!(said.contains("plain-file") && !said.contains("code: 14"), "{said}");
}

/// `pad admin token` prints the token alone on stdout and then, on
/// stderr, the next step: saving it as a profile with `pad auth login`.
#[test]
fn admin_token_says_the_next_step() {
    let server = TestServer::start();
    let db = format!("sqlite://{}", server.home.join("pad.db").display());
    let out = ok(server.pad_output(["admin", "token", "--email", "owner@localhost", "--database-url", &db]));
    let token = stdout(&out).trim().to_string();
    assert!(token.starts_with("pad_"), "{token}");
    let said = stderr(&out);
    // stdout is not a terminal here: the secret is not repeated on stderr.
    assert!(said.contains(&format!("pad auth login --url {} --token ", server.url)), "{said}");
    assert!(!said.contains(&token), "{said}");
}

/// `pad SUBCOMMAND… -h` for every subcommand, by walking the `Commands:`
/// sections from the top.
fn every_help() -> Vec<(String, String)> {
    let mut todo = vec![Vec::<String>::new()];
    let mut pages = Vec::new();
    while let Some(path) = todo.pop() {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pad"))
            .args(&path)
            .arg("-h")
            .env("NO_COLOR", "1")
            .env("COLUMNS", "200")
            .output()
            .unwrap();
        let help = stdout(&out);
        let mut in_commands = false;
        for line in help.lines() {
            if line.ends_with(':') && !line.starts_with(' ') {
                in_commands = line == "Commands:";
                continue;
            }
            if in_commands
                && let Some(name) = line.split_whitespace().next()
                && name != "help"
            {
                todo.push(path.iter().cloned().chain([name.trim_end_matches(',').to_string()]).collect());
            }
        }
        pages.push((path.join(" "), help));
    }
    pages
}

/// Every argument and option in every help page has a description, and
/// `serve` names PostgreSQL URLs beside SQLite's.
#[test]
fn every_argument_in_help_is_described() {
    let mut bare = Vec::new();
    for (command, help) in every_help() {
        let mut in_args = false;
        for line in help.lines() {
            if line.ends_with(':') && !line.starts_with(' ') {
                in_args = line == "Arguments:" || line == "Options:";
                continue;
            }
            let spec = line.trim();
            if !in_args || !line.starts_with("  ") || line.starts_with("          ") {
                continue;
            }
            // The text after the two spaces must be words, not only clap's
            // `[possible values: …]` or `[default: …]`.
            match spec.split_once("  ").map(|(_, text)| text.trim_start()) {
                Some(text) if !text.starts_with('[') => {}
                _ => bare.push(format!("pad {command}: {spec}")),
            }
        }
    }
    assert!(bare.is_empty(), "arguments without a description:\n{}", bare.join("\n"));
    let serve = every_help().into_iter().find(|(c, _)| c == "serve").unwrap().1;
    assert!(serve.contains("postgres://") && serve.contains("sqlite://"), "{serve}");
}

/// Help names where the TTL default comes from, never a figure a workspace
/// may have changed (`pad workspace set --default-ttl`); renew keeps the
/// lease's own TTL.
#[test]
fn ttl_help_names_the_default_not_a_figure() {
    let pages = every_help();
    let page = |c: &str| pages.iter().find(|(name, _)| name == c).unwrap_or_else(|| panic!("{c}")).1.clone();
    for command in ["item claim", "item claim-next", "run", "drain"] {
        let help = page(command);
        assert!(help.contains("[default: the workspace's default TTL]"), "{command}: {help}");
        assert!(!help.contains("15m"), "{command}: {help}");
    }
    let renew = page("item renew");
    assert!(renew.contains("[default: the lease's own TTL]") && !renew.contains("15m"), "{renew}");
}

/// A release refused because another holder has the lease names the two
/// ways on; `--force --reason` on your own lease is a plain release that
/// says so and keeps the reason in its `lease.released` event.
#[test]
fn release_says_the_ways_on_and_force_on_your_own_lease_keeps_the_reason() {
    let server = TestServer::start();
    let r = stdout(&ok(server.pad_output(["item", "create", "one"]))).trim().to_string();
    ok(server.pad_output(["item", "claim", &r, "--holder", "runner-a"]));
    let out = server.pad_output(["item", "release", &r, "--holder", "runner-b"]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("--holder runner-a") && said.contains("--force --reason"), "{said}");

    let out =
        ok(server.pad_output(["item", "release", &r, "--holder", "runner-a", "--force", "--reason", "done early"]));
    let said = stdout(&out);
    assert!(said.contains("Lease released") && said.contains("done early"), "{said}");
    let client = pad_client::Client::new(server.url.parse().unwrap(), &server.token).unwrap();
    let events = tokio::runtime::Runtime::new().unwrap().block_on(client.events("default", 0, 100)).unwrap();
    let released =
        events.iter().rfind(|e| e.kind == pad_core::EventKind::LeaseReleased).expect("a lease.released event");
    assert_eq!(released.data["reason"], "done early", "{released:?}");
}

/// `item list` shows the work still to do (open, in-progress) unless
/// `--status` asks otherwise; `--status all` (or `-s all`) lists every
/// status; `--limit 0` is refused with a sentence.
#[test]
fn item_list_hides_finished_items_and_takes_status_all() {
    let server = TestServer::start();
    let refs: Vec<String> = ["open one", "done one", "cancelled one"]
        .iter()
        .map(|t| stdout(&ok(server.pad_output(["item", "create", t]))).trim().to_string())
        .collect();
    ok(server.pad_output(["item", "update", &refs[1], "--status", "done"]));
    ok(server.pad_output(["item", "update", &refs[2], "--status", "cancelled"]));
    let listed = |args: &[&str]| -> Vec<String> {
        let out = stdout(&ok(server.pad_output([&["item", "list"][..], args].concat())));
        out.lines().map(|l| l.split('\t').next().unwrap().to_string()).collect()
    };
    assert_eq!(listed(&[]), [refs[0].clone()]);
    let mut all = listed(&["--status", "all"]);
    all.sort();
    assert_eq!(all, refs);
    assert_eq!(listed(&["-s", "done"]), [refs[1].clone()]);

    let out = server.pad_output(["item", "list", "--limit", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("at least 1") && !stderr(&out).contains("--cursor"), "{}", stderr(&out));
}

/// An id that is not a number is refused in a sentence naming the id.
#[test]
fn ids_that_are_not_numbers_are_named() {
    let server = TestServer::start();
    for (args, said) in [
        (["token", "revoke", "abc"], "token id must be a number, like 12"),
        (["webhook", "remove", "abc"], "webhook id must be a number, like 3"),
    ] {
        let out = server.pad_output(args);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(said) && !err.contains("invalid digit"), "{err}");
    }
}

/// A `pad serve` that fails to start (its port taken, a bad
/// `PAD_SQLITE_SYNCHRONOUS`) leaves neither a migrated database nor a lock
/// file behind, and says why without a panic.
#[test]
fn a_failed_serve_leaves_no_database_and_no_lock_file() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    for (listen, sync) in [(format!("127.0.0.1:{port}"), None), ("127.0.0.1:0".to_string(), Some("bogus"))] {
        let home = tempfile::tempdir().unwrap();
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_pad"));
        cmd.env("PAD_HOME", home.path()).args(["serve", "--listen", &listen]).stdin(std::process::Stdio::null());
        if let Some(sync) = sync {
            cmd.env("PAD_SQLITE_SYNCHRONOUS", sync);
        }
        let out = cmd.output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success() && out.status.code() != Some(101), "{listen} {sync:?}: {said}");
        assert!(!home.path().join("pad.db").exists(), "{listen} {sync:?}: a database was left behind");
        assert!(!home.path().join("pad.db.lock").exists(), "{listen} {sync:?}: a lock file was left behind");
    }
    drop(taken);
}

fn status_of(server: &TestServer, r: &str) -> String {
    let out = ok(server.pad_output(["--format", "json", "item", "show", r]));
    let item: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    item["status"].as_str().unwrap().to_string()
}

/// `pad item edit` is `update`, and `pad item close` closes as `gh issue
/// close` does: done by default, cancelled with `--reason "not planned"`,
/// with an optional closing comment and update's guards.
#[test]
fn edit_is_update_and_close_closes_as_gh_does() {
    let server = TestServer::start();
    let r = stdout(&ok(server.pad_output(["item", "create", "one"]))).trim().to_string();
    assert_eq!(stdout(&ok(server.pad_output(["item", "edit", &r, "--title", "uno"]))), format!("Updated {r}\n"));

    assert_eq!(stdout(&ok(server.pad_output(["item", "close", &r, "-c", "shipped"]))), format!("Closed {r} (done)\n"));
    assert_eq!(status_of(&server, &r), "done");
    assert!(stdout(&ok(server.pad_output(["item", "comment", &r, "--list"]))).contains("shipped"));

    let r2 = stdout(&ok(server.pad_output(["item", "create", "two"]))).trim().to_string();
    let out = ok(server.pad_output(["item", "close", &r2, "--reason", "not planned"]));
    assert_eq!(stdout(&out), format!("Closed {r2} (cancelled)\n"));
    assert_eq!(status_of(&server, &r2), "cancelled");

    // A guard that does not hold refuses and changes nothing.
    let r3 = stdout(&ok(server.pad_output(["item", "create", "three"]))).trim().to_string();
    ok(server.pad_output(["item", "claim", &r3, "--holder", "runner-a"]));
    let out = server.pad_output(["item", "close", &r3, "--lease-epoch", "9", "-c", "closing now"]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert_eq!(status_of(&server, &r3), "open");
    // Nor is the closing comment left behind.
    assert!(!stdout(&ok(server.pad_output(["item", "comment", &r3, "--list"]))).contains("closing now"));
}

/// `pad completions --help` and the README say how to install the script
/// for bash, zsh and fish.
#[test]
fn completions_say_how_to_install_them() {
    let help = stdout(&ok(std::process::Command::new(env!("CARGO_BIN_EXE_pad"))
        .args(["completions", "--help"])
        .output()
        .unwrap()));
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    for line in [
        "pad completions bash > ~/.local/share/bash-completion/completions/pad",
        "pad completions zsh > ~/.zfunc/_pad",
        "pad completions fish > ~/.config/fish/completions/pad.fish",
    ] {
        assert!(help.contains(line), "{line} in: {help}");
        assert!(readme.contains(line), "{line} in README.md");
    }
    // Each generated script is accepted by its shell, where the shell is installed.
    let bash =
        ok(std::process::Command::new(env!("CARGO_BIN_EXE_pad")).args(["completions", "bash"]).output().unwrap());
    assert!(stdout(&bash).contains("complete "), "{}", stdout(&bash));
}

/// Empty results are said in one style, a sentence on stderr: `No items`,
/// `No comments on TASK-1`, `No ready item`.
#[test]
fn empty_results_are_sentences() {
    let server = TestServer::start();
    let out = ok(server.pad_output(["item", "list"]));
    assert_eq!(stderr(&out), "No items\n");
    let r = stdout(&ok(server.pad_output(["item", "create", "one"]))).trim().to_string();
    let out = ok(server.pad_output(["item", "comment", &r, "--list"]));
    assert_eq!(stderr(&out), format!("No comments on {r}\n"));
    ok(server.pad_output(["item", "claim", &r, "--holder", "runner-a"]));
    let out = ok(server.pad_output(["item", "frontier"]));
    assert_eq!(stderr(&out), "No ready item\n");
    let out = ok(server.pad_output(["item", "list", "--limit", "1"]));
    ok(server.pad_output(["item", "create", "two"]));
    let out2 = ok(server.pad_output(["item", "list", "--limit", "1"]));
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    assert!(stderr(&out2).starts_with("More items: pad item list "), "{}", stderr(&out2));
}

/// The `Updated:` time of `pad item show`, as printed (whole seconds).
fn shown_updated_at(server: &TestServer, r: &str) -> String {
    let show = stdout(&ok(server.pad_output(["item", "show", r])));
    let line = show.lines().find(|l| l.starts_with("Updated:")).unwrap_or_else(|| panic!("{show}"));
    line.trim_start_matches("Updated:").trim().split(' ').next().unwrap().to_string()
}

/// The time `item show` prints is the one `--expected-updated-at` takes
/// back; a stale one is refused (exit 7) with times as README "Times" has
/// them: whole seconds and how long ago, never microseconds.
#[test]
fn expected_updated_at_takes_the_time_item_show_prints() {
    let server = TestServer::start();
    let r = stdout(&ok(server.pad_output(["item", "create", "one"]))).trim().to_string();
    let shown = shown_updated_at(&server, &r);
    assert!(shown.ends_with('Z') && !shown.contains('.'), "{shown}");
    // A second apart, so each time in seconds names one change (two changes
    // within one second are refused: a time in seconds cannot tell them apart).
    let a_second = std::time::Duration::from_millis(1100);
    std::thread::sleep(a_second);
    ok(server.pad_output(["item", "update", &r, "--title", "uno", "--expected-updated-at", &shown]));
    std::thread::sleep(a_second);
    ok(server.pad_output(["item", "close", &r, "--expected-updated-at", &shown_updated_at(&server, &r)]));

    // The item changed since: refused, whether within the same second or later.
    let out = server.pad_output(["item", "update", &r, "--title", "again", "--expected-updated-at", &shown]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));

    let out =
        server.pad_output(["item", "update", &r, "--title", "x", "--expected-updated-at", "2026-01-01T00:00:00.5Z"]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    let said = stderr(&out);
    let micro = said.split(|c: char| !(c.is_ascii_digit() || c == '.')).any(|w| w.contains('.') && w.len() > 4);
    assert!(!micro, "{said}");
    assert!(said.contains(&format!("{r} has changed")) && said.contains("(just now)"), "{said}");
    assert!(said.contains(&format!("pad item show {r}")), "{said}");
}

/// A number that is not one is refused (exit 2) in a sentence about what
/// was typed, after the flag typed; never Rust's or clap's own words.
#[test]
fn numbers_are_refused_in_sentences_naming_the_flag() {
    let server = TestServer::start();
    let r = stdout(&ok(server.pad_output(["item", "create", "one"]))).trim().to_string();
    let refused = |args: &[&str], flag: &str, said: &str| {
        let out = server.pad_output(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(flag) && err.contains(said), "{args:?}: {err}");
        for leak in ["invalid digit", "4294967295", "is not in", "unexpected argument", "tip:"] {
            assert!(!err.contains(leak), "{args:?}: {err}");
        }
    };
    let whole = |v: &str| format!("`{v}` is not a whole number");
    refused(&["item", "complete", &r, "--epoch", "abc"], "--epoch", &whole("abc"));
    refused(&["item", "fail", &r, "--epoch", "1.5"], "--epoch", &whole("1.5"));
    refused(&["item", "complete", &r, "--lease-id", "abc"], "--lease-id", &whole("abc"));
    refused(&["item", "update", &r, "--title", "t", "--lease-id", "abc"], "--lease-id", &whole("abc"));
    refused(&["item", "claim-next", "--count", "many"], "--count", &whole("many"));
    refused(&["item", "claim-next", "--count", "33"], "--count", "must be from 1 to 32");
    // A negative number is a number, not a flag named `-1`.
    refused(&["item", "claim-next", "--count", "-1"], "--count", "must be from 1 to 32; got -1");
    refused(&["drain", "--jobs", "-1", "--", "true"], "--jobs", "must be from 1 to 32; got -1");
    refused(&["drain", "-j", "-1", "--", "true"], "--jobs", "must be from 1 to 32; got -1");
    refused(&["drain", "--max", "abc", "--", "true"], "--max", &whole("abc"));
    refused(&["item", "claim", &r, "--ttl-minutes", "0"], "--ttl-minutes", "must be at least 1");
    refused(&["item", "list", "--limit", "abc"], "--limit", &whole("abc"));
    refused(&["wit", "claim", "pad:default/TASK#1", "--ttl-minutes", "60"], "--ttl-minutes", "must be from 0 to 59");

    // Past the workspace's maximum: the server's refusal names the flag typed, in its unit.
    let out = server.pad_output(["item", "claim", &r, "--ttl-minutes", "2000"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("`--ttl-minutes` must be between 1 and 1440") && err.contains("got 2000"), "{err}");
}

/// `pad drain --wait` is `--follow` by another name: a flag. Given a value
/// (`--wait 30s`, as `pad item claim-next` takes one), the refusal says so,
/// and what the flag does, instead of clap's "unexpected argument '30s'".
#[test]
fn drain_wait_given_a_value_says_it_takes_none() {
    let server = TestServer::start();
    for args in [
        &["drain", "--wait", "30s", "--", "true"][..],
        &["drain", "--wait=30s", "--", "true"],
        &["drain", "--wait", "30", "--max", "1", "--", "true"],
    ] {
        let out = server.pad_output(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("`--wait` takes no value"), "{args:?}: {err}");
        assert!(err.contains("--follow") && err.contains("keeps draining"), "{args:?}: {err}");
        assert!(!err.contains("unexpected argument") && !err.contains("unexpected value"), "{args:?}: {err}");
    }
    // As a flag it still means --follow; a bad command line elsewhere is refused as before.
    let out = server.pad_output(["drain", "--wait", "--once", "--max", "1", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!stderr(&out).contains("takes no value"), "{}", stderr(&out));
}
