//! PostgreSQL for pad's end-to-end fault tests: the scratch databases and
//! private clusters every crate's tests share (`pad_test_support::pg`), and
//! `psql`.

use std::process::Command;

pub use pad_test_support::pg::{ENV, PrivateCluster, ScratchDb};

/// Runs one SQL statement with `psql` against `url`; panics on failure.
pub fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .unwrap_or_else(|e| panic!("cannot run psql: {e}"));
    assert!(out.status.success(), "psql {sql:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}
