//! What the lease e2e tests (drain, drain_jobs, supervise) ask of a `pad`
//! child process: an item made, its JSON, an output's text and exit code,
//! and a wait for a condition with a net against hangs.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::server::TestServer;

/// Creates an item through the CLI and answers its ref.
pub fn create(s: &TestServer, title: &str) -> String {
    let out = s.pad_output(["item", "create", title]);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out).trim().to_string()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn code(o: &Output) -> i32 {
    o.status.code().expect("exited, not killed")
}

/// `pad item show REF --format json`.
pub fn show(s: &TestServer, r: &str) -> Value {
    let out = s.pad_output(["item", "show", r, "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Waits until `cond` holds, or panics after `limit` (a net against a
/// hang, not a measure of speed).
pub fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
