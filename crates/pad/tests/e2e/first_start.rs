//! The first start is one transaction, and a lost token is recoverable
//! offline (docs/reliability.md, "Hostile member: identity"). A real
//! `pad serve` is killed with SIGKILL at each step inside its bootstrap
//! (held there by `PAD_FAILPOINT`); the next start must bootstrap whole.
//! On SQLite, and on PostgreSQL when `PAD_TEST_DATABASE_URL` is set.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::pg::ScratchDb;
use common::server::TestServer;

const POINTS: [&str; 3] = ["bootstrap-user", "bootstrap-workspace", "bootstrap-token"];

/// A fresh SQLite URL (kept alive by the directory) and, when configured, a
/// fresh PostgreSQL database, each made by `fresh`.
fn each_backend(mut test: impl FnMut(&str, &str)) {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}", dir.path().join("pad.db").display());
    test("sqlite", &sqlite);
    match ScratchDb::create_blocking() {
        Some(db) => test("postgres", &db.url),
        None => eprintln!("PAD_TEST_DATABASE_URL is unset: PostgreSQL skipped"),
    }
}

/// Starts `pad serve` held at `point`, waits until it is there, kills it
/// with SIGKILL.
fn kill_at(point: &str, database_url: &str) {
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pad"))
        .args(["serve", "--listen", "127.0.0.1:0", "--database-url", database_url])
        .env("PAD_HOME", home.path())
        .env("PAD_FAILPOINT", point)
        .env("PAD_PG_MAX_CONNECTIONS", "4")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let wanted = format!("pad: failpoint {point} reached");
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line == wanted => break,
            Ok(line) => assert!(!line.starts_with("pad: listening"), "{point}: served without stopping: {line}"),
            Err(e) => panic!("{point}: the server never reached the failpoint ({e})"),
        }
    }
    child.kill().unwrap(); // SIGKILL, inside the bootstrap transaction
    child.wait().unwrap();
    assert!(!home.path().join("credentials.toml").exists(), "{point}: a token was announced before the commit");
}

#[test]
fn a_crash_inside_the_first_start_never_bricks_the_database() {
    each_backend(|name, _| {
        for point in POINTS {
            // A fresh database per crash point.
            let dir = tempfile::tempdir().unwrap();
            let db = if name == "sqlite" { None } else { ScratchDb::create_blocking() };
            let url = db
                .as_ref()
                .map_or_else(|| format!("sqlite://{}", dir.path().join("pad.db").display()), |d| d.url.clone());
            kill_at(point, &url);
            // The next start bootstraps again (before the fix, it saw the
            // crashed start's user, skipped, and no token existed anywhere).
            let server = TestServer::start_with_db(&url);
            let out = server.pad_output(["item", "create", "after the crash"]);
            assert!(out.status.success(), "{name} {point}: {}", String::from_utf8_lossy(&out.stderr));
            println!("{name}: killed at {point}, the next start bootstrapped whole");
        }
    });
}

#[test]
fn admin_token_recovers_a_database_with_no_usable_token() {
    each_backend(|name, url| {
        let server = TestServer::start_with_db(url);
        // The owner revokes their only token: nothing works any more.
        let list = server.pad_output(["--format", "json", "token", "list"]);
        assert!(list.status.success(), "{}", String::from_utf8_lossy(&list.stderr));
        let tokens: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
        let id = tokens["tokens"][0]["id"].as_i64().unwrap().to_string();
        assert!(server.pad_output(["token", "revoke", &id]).status.success());
        assert_eq!(server.pad_output(["item", "list"]).status.code(), Some(4), "{name}: the token still works");

        let admin = |email: &str| {
            server.pad().args(["admin", "token", "--email", email, "--database-url", url]).output().unwrap()
        };
        let unknown = admin("nobody@example.com");
        assert_eq!(unknown.status.code(), Some(5), "{name}");
        assert!(String::from_utf8_lossy(&unknown.stderr).contains("no user nobody@example.com"), "{name}");
        let out = admin("owner@localhost");
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
        assert!(token.starts_with("pad_"), "{name}: {token}");
        let works = server.pad().env("PAD_TOKEN", &token).args(["item", "list"]).output().unwrap();
        assert!(works.status.success(), "{name}: {}", String::from_utf8_lossy(&works.stderr));
        // An unscoped token: it may create workspaces.
        let ws = server.pad().env("PAD_TOKEN", &token).args(["workspace", "create", "recovered"]).output().unwrap();
        assert!(ws.status.success(), "{name}: {}", String::from_utf8_lossy(&ws.stderr));
    });
}
