//! The daily driver (README.md, "Configuration" and "Exit codes"): what a
//! person meets beyond the tour, against a real `pad serve`. Credentials
//! stay with their server, errors say what to do, `--format json` means JSON
//! for refusals too.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::server::TestServer;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A loopback listener that records every byte any client sends it (and
/// answers nothing useful), to catch a token sent where it must not go.
fn spy() -> (String, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            conn.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = conn.read(&mut buf) {
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
                if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            let _ = conn.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (url, seen)
}

#[test]
fn a_profile_token_is_never_sent_to_another_server() {
    let server = TestServer::start();
    let (spy_url, seen) = spy();
    // The listener does receive requests when given a token of its own, so
    // silence below is the CLI's choice, not a dead listener.
    let o =
        server.pad().env("PAD_TOKEN", "pad_meant_for_spy").args(["--url", &spy_url, "item", "list"]).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&seen.lock().unwrap()).contains("Bearer pad_meant_for_spy"));
    seen.lock().unwrap().clear();

    let by_flag = server.pad_output(["--url", &spy_url, "item", "list"]);
    let by_env = server.pad().env("PAD_URL", &spy_url).args(["item", "list"]).output().unwrap();
    std::fs::write(server.home.parent().unwrap().join(".pad.toml"), format!("url = \"{spy_url}\"\n")).unwrap();
    let by_project = server.pad_output(["item", "list"]);
    std::fs::remove_file(server.home.parent().unwrap().join(".pad.toml")).unwrap();
    for (how, o) in [("--url", &by_flag), ("PAD_URL", &by_env), (".pad.toml", &by_project)] {
        assert_eq!(o.status.code(), Some(3), "{how}: {}", stderr(o));
        let e = stderr(o);
        assert!(e.contains("PAD_TOKEN") && e.contains("--profile") && e.contains(&server.url), "{how}: {e}");
    }
    std::thread::sleep(Duration::from_millis(200));
    let seen = String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
    assert!(!seen.contains("Bearer"), "the spy received a token: {seen}");

    // The profile's own server, spelled with a trailing slash, still gets it.
    let o = server.pad_output(["--url", &format!("{}/", server.url), "item", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn an_api_url_is_explained() {
    let server = TestServer::start();
    let o = server.pad_output(["--url", &format!("{}/api/v1", server.url), "item", "list"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("server root"), "{}", stderr(&o));
}

/// `pad auth login` on a terminal: the pasted token is not echoed back.
#[test]
fn login_does_not_echo_the_token() {
    let server = TestServer::start();
    let (mut master, slave) = pty();
    let mut child = server
        .pad()
        .args(["--profile", "other", "--url", &server.url, "auth", "login"])
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    // Read the terminal on a thread for the child's whole life: Linux may
    // drop what is unread once the last slave fd closes.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut reader = master.try_clone().unwrap();
    let sink = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1024];
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !String::from_utf8_lossy(&seen.lock().unwrap()).contains("Token:") {
        assert!(std::time::Instant::now() < deadline, "no prompt");
        std::thread::sleep(Duration::from_millis(20));
    }
    master.write_all(format!("{}\n", server.token).as_bytes()).unwrap();
    let status = child.wait().unwrap();
    while !String::from_utf8_lossy(&seen.lock().unwrap()).contains("Logged in") {
        if std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let seen = seen.lock().unwrap().clone();
    let seen = String::from_utf8_lossy(&seen);
    assert!(status.success(), "{seen}");
    assert!(seen.contains("Logged in"), "{seen}");
    assert!(!seen.contains(&server.token), "the token was echoed: {seen}");
}

#[test]
fn a_refused_login_does_not_suggest_logging_in() {
    let server = TestServer::start();
    let o = server.pad().args(["--url", &server.url, "auth", "login", "--token", "pad_wrong"]).output().unwrap();
    assert_eq!(o.status.code(), Some(4));
    let e = stderr(&o);
    assert!(!e.contains("auth login") && e.contains("refused this token"), "{e}");
}

#[test]
fn an_absent_server_is_one_sentence() {
    let server = TestServer::start();
    // A port nothing listens on: bind, note, close.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let o = server.pad().env("PAD_TOKEN", "pad_x").args(["--url", &url, "item", "list"]).output().unwrap();
    assert_eq!(o.status.code(), Some(8));
    let e = stderr(&o);
    assert_eq!(e.trim(), format!("error: no pad server answers at {url} (from --url) — is `pad serve` running?"));
}

#[test]
fn ttl_errors_are_in_the_users_units() {
    let server = TestServer::start();
    assert!(server.pad_output(["item", "create", "t"]).status.success());
    let o = server.pad_output(["item", "claim", "TASK-1", "--holder", "me", "--ttl", "25h"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("`--ttl` must be between 1s and 24h (the workspace maximum); got 25h"), "{e}");
    for bad in ["-5m", "0s", "soon"] {
        let o = server.pad_output(["item", "claim", "TASK-1", "--holder", "me", "--ttl", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        let e = stderr(&o);
        for never in ["ttl_seconds", "expected number", "-- -5"] {
            assert!(!e.contains(never), "{bad}: {e}");
        }
    }
}

#[test]
fn json_format_prints_the_refusal_envelope() {
    let server = TestServer::start();
    assert!(server.pad_output(["item", "create", "t"]).status.success());
    let o = server.pad_output(["item", "claim", "TASK-1", "--holder", "a", "--ttl", "5m"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = server.pad_output(["--format", "json", "item", "claim", "TASK-1", "--holder", "b"]);
    assert_eq!(o.status.code(), Some(7));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON on stdout");
    assert_eq!(v["error"]["code"], "lease_held");
    assert_eq!(v["error"]["details"]["holder"], "a");
    assert_eq!(v["error"]["details"]["epoch"], 1);
    assert!(v["error"]["details"]["expires_in_seconds"].as_i64().unwrap() > 200);
    assert!(v["error"]["message"].is_string());

    // A failure before any request is JSON too, with the same exit code.
    let o = server.pad().args(["--format", "json", "--profile", "nope", "item", "list"]).output().unwrap();
    assert_eq!(o.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON on stdout");
    assert_eq!(v["error"]["code"], "config_error");
}

fn pty() -> (std::fs::File, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty fills two fds we then own.
    let rc =
        unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: fresh fds from openpty, owned once each.
    unsafe { (std::fs::File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

#[test]
fn refusals_name_what_would_work() {
    let server = TestServer::start();
    assert!(server.pad_output(["item", "create", "t"]).status.success());
    // Unknown kind: the kinds are listed.
    let o = server.pad_output(["item", "create", "x", "--kind", "epic"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("the kinds are: task, bug"), "{}", stderr(&o));

    // A viewer's refusal names the role needed.
    assert!(server.pad_output(["member", "add", "v@x", "--role", "viewer"]).status.success());
    let token = stdout(&server.pad_output(["token", "create", "t", "--email", "v@x"])).trim().to_string();
    let o = server.pad().env("PAD_TOKEN", &token).args(["item", "claim", "TASK-1"]).output().unwrap();
    assert_eq!(o.status.code(), Some(4));
    let e = stderr(&o);
    assert!(e.contains("is viewer; to claim, renew or release leases you need editor or owner"), "{e}");
    let o =
        server.pad().env("PAD_TOKEN", &token).args(["--format", "json", "item", "claim", "TASK-1"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["error"]["details"]["required_role"], "editor");

    // A forgotten `--`.
    let o = server.pad_output(["run", "TASK-1", "sh", "-c", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("tip: put `--` before the command"), "{}", stderr(&o));
}

/// README.md, "Lists of values": a comma separates values on every command.
#[test]
fn a_comma_separates_labels_and_blockers_everywhere() {
    let server = TestServer::start();
    let json = |args: &[&str]| -> serde_json::Value {
        let o = server.pad().arg("--format").arg("json").args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        serde_json::from_str(&stdout(&o)).unwrap()
    };
    json(&["item", "create", "first"]);
    json(&["item", "create", "second"]);
    let item = json(&["item", "create", "third", "--label", "a,b", "--label", "c", "--blocked-by", "TASK-1,TASK-2"]);
    assert_eq!(item["labels"], serde_json::json!(["a", "b", "c"]));
    assert_eq!(item["blocked_by"], serde_json::json!(["TASK-1", "TASK-2"]));
    let item = json(&["item", "update", "TASK-3", "--label", "d,e", "--remove-label", "a,b", "--blocked-by", "TASK-1"]);
    assert_eq!(item["labels"], serde_json::json!(["c", "d", "e"]));
    assert_eq!(item["blocked_by"], serde_json::json!(["TASK-1"]));
    let page = json(&["item", "list", "--label", "c,e"]);
    assert_eq!(page["items"].as_array().unwrap().len(), 1);

    // The API refuses a label that holds a comma, so none can exist.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = pad_client::Client::new(server.url.parse().unwrap(), &server.token).unwrap();
    let new = pad_core::NewItem { title: "x".into(), labels: vec!["a,b".into()], ..Default::default() };
    let Err(e) = runtime.block_on(client.create_item("default", &new)) else { panic!("a comma label was stored") };
    assert_eq!(e.code(), Some(pad_core::api::ErrorCode::ValidationFailed));
}

/// `pad serve` refuses a database it cannot use, and a second server on one
/// SQLite file, before touching either.
#[test]
fn serve_guards_its_store() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let serve = |database_url: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_pad"))
            .args(["serve", "--listen", "127.0.0.1:0", "--database-url", database_url])
            .env("PAD_HOME", dir.path().join("home"))
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let o = serve("mysql://x");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("mysql: is not a database") && stderr(&o).contains("postgres://"), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "something was created");

    let db = server.home.join("pad.db");
    let o = serve(&format!("sqlite://{}", db.display()));
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("another `pad serve` is already using"), "{}", stderr(&o));
    // The first server is unharmed and says where to point a browser.
    assert!(server.pad_output(["item", "list"]).status.success());
    assert!(server.log().contains(&format!("pad: open {}/ in a browser", server.url)), "{}", server.log());
}

#[test]
fn watch_checks_its_filters_and_says_what_it_watches() {
    let server = TestServer::start();
    assert!(server.pad_output(["item", "create", "t"]).status.success());
    let o = server.pad_output(["watch", "--type", "lease.claim"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("the types are: item.created"), "{}", stderr(&o));
    let o = server.pad_output(["watch", "--ref", "TASK-9"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));

    let mut child = server
        .pad()
        .args(["watch", "--type", "lease.claimed", "--ref", "task-1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stderr.take().unwrap()), &mut said).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(said.contains("watching workspace `default`") && said.contains("lease.claimed on TASK-1"), "{said}");
}

#[test]
fn list_aliases_and_a_next_page_hint_that_keeps_the_filters() {
    let server = TestServer::start();
    for t in ["a", "b", "c"] {
        assert!(server.pad_output(["item", "create", t, "--label", "x", "--priority", "high"]).status.success());
    }
    let o = server.pad_output(["item", "ls", "--label", "x", "--priority", "high", "--limit", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    let hint = e.lines().find_map(|l| l.strip_prefix("More items: ")).expect("a next-page hint");
    assert!(hint.starts_with("pad item list -w default --label x --priority high --limit 2 --cursor "), "{hint}");
    // The hint, run as given, is the rest of the same list.
    let args: Vec<&str> = hint.split(' ').skip(1).collect();
    let rest = server.pad_output(&args);
    assert!(rest.status.success(), "{}", stderr(&rest));
    assert_eq!(stdout(&rest).lines().count(), 1, "one item, no header into a pipe: {}", stdout(&rest));
    assert!(server.pad_output(["item", "view", "TASK-1"]).status.success());
}

#[test]
fn clicolor_force_colours_a_pipe_and_no_color_wins() {
    let server = TestServer::start();
    assert!(server.pad_output(["item", "create", "t"]).status.success());
    let list = |no_color: Option<&str>| {
        let mut cmd = server.pad();
        cmd.env_remove("NO_COLOR").env("CLICOLOR_FORCE", "1");
        if let Some(v) = no_color {
            cmd.env("NO_COLOR", v);
        }
        stdout(&cmd.args(["item", "list"]).output().unwrap())
    };
    assert!(list(None).contains("\x1b["), "CLICOLOR_FORCE into a pipe: no colour");
    assert!(!list(Some("1")).contains("\x1b["), "NO_COLOR must win");
}

/// On a terminal a long title is cut to its width; into a pipe it is whole.
#[test]
fn titles_fit_the_terminal_and_pipes_get_them_whole() {
    let server = TestServer::start();
    let title = format!("A long title {}", "x".repeat(200));
    assert!(server.pad_output(["item", "create", &title]).status.success());
    assert!(stdout(&server.pad_output(["item", "list"])).contains(&title));

    let (master, slave) = pty();
    let winsize = libc::winsize { ws_row: 24, ws_col: 60, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: sets the size of a terminal this test owns.
    assert_eq!(unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&slave), libc::TIOCSWINSZ, &winsize) }, 0);
    // Held open so the terminal keeps what the child wrote after it exits.
    let _keep = slave.try_clone().unwrap();
    let status = server
        .pad()
        .env_remove("COLUMNS")
        .args(["item", "list"])
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .status()
        .unwrap();
    assert!(status.success());
    let mut seen = Vec::new();
    let mut reader = master;
    let mut buf = [0u8; 4096];
    // The child is gone and its output is buffered in the terminal: read
    // without blocking until there is no more.
    // SAFETY: fcntl on a descriptor this test owns.
    unsafe {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&reader);
        libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK);
    }
    while let Ok(n @ 1..) = reader.read(&mut buf) {
        seen.extend_from_slice(&buf[..n]);
    }
    let seen = String::from_utf8_lossy(&seen);
    let row = seen.lines().find(|l| l.contains("A long title")).expect("the row");
    assert!(row.trim_end().ends_with('…'), "{row:?}");
    assert!(row.trim_end().chars().count() <= 60, "{row:?}");
}

/// docs/api.md, "Workspace settings": owners change the TTL bounds and the
/// quarantine thresholds from the CLI; refusals are in the flags' words, and
/// other roles are told the role they would need.
#[test]
fn workspace_set_changes_lease_settings_for_owners_only() {
    let server = TestServer::start();
    let o = server.pad_output([
        "workspace",
        "set",
        "--default-ttl",
        "30m",
        "--max-ttl",
        "2h",
        "--quarantine-after-expiries",
        "5",
        "--quarantine-after-failures",
        "0",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = server.pad_output(["workspace", "show"]);
    let out = stdout(&o);
    assert!(out.contains("Lease TTL:   30m default, 2h max"), "{out}");
    assert!(out.contains("Quarantine:  after 5 expiries, never by failures"), "{out}");
    // A claim now gets the new default, and the new maximum bounds `--ttl`.
    assert!(server.pad_output(["item", "create", "t"]).status.success());
    let o = server.pad_output(["--format", "json", "item", "claim", "TASK-1", "--holder", "a"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["lease"]["ttl_seconds"], 1800, "{v}");
    let o = server.pad_output(["item", "claim", "TASK-1", "--holder", "a", "--ttl", "3h"]);
    assert!(stderr(&o).contains("between 1s and 2h (the workspace maximum); got 3h"), "{}", stderr(&o));

    // Bad values: exit 2, said with the flags; JSON is the API's envelope.
    let o = server.pad_output(["workspace", "set", "--default-ttl", "3h"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).trim(), "error: --default-ttl must be between 1s and the maximum (2h); got 3h");
    let o = server.pad_output(["workspace", "set", "--max-ttl", "10m"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--max-ttl must be at least the default TTL (30m); got 10m"), "{}", stderr(&o));
    let o = server.pad_output(["workspace", "set", "--max-ttl", "25h"]);
    assert!(stderr(&o).contains("--max-ttl must be between 1s and 24h; got 25h"), "{}", stderr(&o));
    let o = server.pad_output(["workspace", "set"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: nothing to change: give one or more of --default-ttl, --max-ttl"),
        "{}",
        stderr(&o)
    );
    let o = server.pad_output(["--format", "json", "workspace", "set", "--quarantine-after-failures", "5000"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON on stdout");
    assert_eq!(v["error"]["code"], "validation_failed");
    assert_eq!(v["error"]["details"]["field"], "quarantine_after_failures");
    let o = server.pad_output(["--format", "json", "workspace", "show"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["settings"]["default_ttl_seconds"], 1800, "a refused change wrote nothing: {v}");
    assert_eq!(v["settings"]["quarantine_after_failures"], 0);

    // Editors and viewers are told which role would do.
    for role in ["editor", "viewer"] {
        let email = format!("{role}@x");
        assert!(server.pad_output(["member", "add", &email, "--role", role]).status.success());
        let token = stdout(&server.pad_output(["token", "create", role, "--email", &email])).trim().to_string();
        let o = server.pad().env("PAD_TOKEN", &token).args(["workspace", "set", "--max-ttl", "1h"]).output().unwrap();
        assert_eq!(o.status.code(), Some(4), "{role}");
        let e = stderr(&o);
        assert!(e.contains(&format!("is {role}; to manage members, kinds and settings you need owner")), "{e}");
    }
}

/// docs/leases.md L7, "Told why": a worker whose lease an owner broke is
/// told the reason and who broke it — by renew, complete and fail, in JSON,
/// and by `pad run`, which stops its command.
#[test]
fn a_worker_whose_lease_was_broken_is_told_why() {
    let server = TestServer::start();
    for t in ["one", "two"] {
        assert!(server.pad_output(["item", "create", t]).status.success());
    }
    let o = server.pad_output(["--format", "json", "item", "claim", "TASK-1", "--holder", "worker-1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lease: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let epoch = lease["lease"]["epoch"].to_string();
    let who: serde_json::Value =
        serde_json::from_str(&stdout(&server.pad_output(["--format", "json", "auth", "whoami"]))).unwrap();
    let me = who["email"].as_str().expect("the owner's email").to_string();
    let o = server.pad_output(["item", "release", "TASK-1", "--force", "--reason", "deploy freeze"]);
    assert!(o.status.success(), "{}", stderr(&o));

    for verb in ["renew", "complete", "fail"] {
        let o = server.pad_output(["item", verb, "TASK-1", "--epoch", &epoch, "--holder", "worker-1"]);
        assert_eq!(o.status.code(), Some(7), "{verb}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("lease on TASK-1 lost: ") && e.contains(" broke it at ") && e.ends_with(": deploy freeze\n"),
            "{verb}: {e}"
        );
        assert!(e.contains(&format!("lost: {me} broke it at ")), "{verb} names the owner: {e}");
    }
    let o =
        server.pad_output(["--format", "json", "item", "renew", "TASK-1", "--epoch", &epoch, "--holder", "worker-1"]);
    assert_eq!(o.status.code(), Some(7));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON on stdout");
    assert_eq!(v["error"]["code"], "lease_lost");
    let ended = &v["error"]["details"]["ended"];
    assert_eq!((ended["ended"].as_str(), ended["reason"].as_str()), (Some("broken"), Some("deploy freeze")), "{v}");
    assert_eq!(ended["broken_by"].as_str(), Some(me.as_str()), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("deploy freeze"), "{v}");
    // `item show` says it too.
    let show = stdout(&server.pad_output(["item", "show", "TASK-1"]));
    assert!(show.contains("deploy freeze"), "{show}");

    // `pad run` loses the lease at its next heartbeat and says why.
    let run = server
        .pad()
        .args(["run", "TASK-2", "--holder", "runner", "--ttl", "6s", "--kill-after", "1s", "--", "sleep", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let o = server.pad_output(["--format", "json", "item", "show", "TASK-2"]);
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        if v["lease"]["holder"] == "runner" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "pad run never claimed");
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = server.pad_output(["item", "release", "TASK-2", "--force", "--reason", "wrong branch"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("pad: TASK-2: lease on TASK-2 lost: ") && e.contains(": wrong branch; stopped `sleep`"), "{e}");

    // So does `pad drain`.
    let drain = server
        .pad()
        .args(["drain", "--once", "--holder", "drainer", "--ttl", "6s", "--kill-after", "1s", "--", "sleep", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let taken = loop {
        let o = server.pad_output(["--format", "json", "item", "list", "--leased"]);
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let mine = v["items"].as_array().unwrap().iter().find(|i| i["lease"]["holder"] == "drainer").cloned();
        if let Some(item) = mine {
            break item["ref"].as_str().unwrap().to_string();
        }
        assert!(std::time::Instant::now() < deadline, "pad drain never claimed");
        std::thread::sleep(Duration::from_millis(100));
    };
    let o = server.pad_output(["item", "release", &taken, "--force", "--reason", "drain stop"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&drain.wait_with_output().unwrap());
    assert!(
        e.contains(&format!("pad: {taken}: lease on {taken} lost: {me} broke it at ")) && e.contains(": drain stop;"),
        "{e}"
    );
}

/// `pad ARGS` on a 200-column terminal: what it wrote there.
fn on_terminal(server: &TestServer, args: &[&str]) -> String {
    let (mut master, slave) = pty();
    let winsize = libc::winsize { ws_row: 24, ws_col: 200, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: sets the size of a terminal this test owns.
    assert_eq!(unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&slave), libc::TIOCSWINSZ, &winsize) }, 0);
    let _keep = slave.try_clone().unwrap();
    let status = server
        .pad()
        .env_remove("COLUMNS")
        .args(args)
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .status()
        .unwrap();
    assert!(status.success(), "{args:?}");
    // SAFETY: fcntl on a descriptor this test owns.
    unsafe {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&master);
        libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK);
    }
    let (mut seen, mut buf) = (Vec::new(), [0u8; 4096]);
    while let Ok(n @ 1..) = master.read(&mut buf) {
        seen.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&seen).replace('\r', "")
}

/// README.md, "Tables for people and scripts": like gh. On a terminal: a header, the `»` marker, the
/// holder of a leased row and times relative to now. Into a pipe: one line
/// per row of TAB-separated fields, no header, marker or colour, and
/// RFC 3339 times.
#[test]
fn tables_are_for_people_on_a_terminal_and_for_scripts_in_a_pipe() {
    let server = TestServer::start();
    assert!(server.pad_output(["item", "create", "parent"]).status.success());
    assert!(server.pad_output(["item", "create", "child", "--parent", "TASK-1"]).status.success());
    let o = server.pad_output(["item", "claim", "TASK-2", "--holder", "runner-a", "--ttl", "15m"]);
    assert!(o.status.success(), "{}", stderr(&o));

    let piped = stdout(&server.pad_output(["item", "list"]));
    let rows: Vec<Vec<&str>> = piped.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 2, "no header: {piped:?}");
    let leased = rows.iter().find(|r| r[0] == "TASK-2").unwrap_or_else(|| panic!("TASK-2 in {piped:?}"));
    assert_eq!((leased.len(), leased[1], leased[3], leased[5]), (6, "open", "runner-a", "child"), "{piped:?}");
    chrono::DateTime::parse_from_rfc3339(leased[4]).expect("an RFC 3339 expiry");
    let free = rows.iter().find(|r| r[0] == "TASK-1").expect("TASK-1");
    assert_eq!((free.len(), free[3], free[4]), (6, "", ""), "{piped:?}");
    assert!(!piped.contains('»') && !piped.contains('\x1b'), "{piped:?}");
    let children = stdout(&server.pad_output(["item", "list", "--parent", "TASK-1"]));
    assert!(children.starts_with("TASK-2\t") && children.lines().count() == 1, "{children:?}");
    let history = stdout(&server.pad_output(["item", "history", "TASK-2"]));
    let at = history.lines().next().and_then(|l| l.split('\t').nth(1)).expect("a version");
    chrono::DateTime::parse_from_rfc3339(at).expect("an RFC 3339 time");

    let list = on_terminal(&server, &["item", "list"]);
    let header = list.lines().next().unwrap_or_default();
    assert!(header.starts_with("  REF") && header.contains("HOLDER") && header.contains("EXPIRES"), "{list:?}");
    let row = list.lines().find(|l| l.contains("TASK-2")).expect("the leased row");
    assert!(row.starts_with("» TASK-2") && row.contains("runner-a") && row.contains("in 1"), "{row:?}");
    assert!(on_terminal(&server, &["item", "history", "TASK-2"]).contains("just now"));
}
