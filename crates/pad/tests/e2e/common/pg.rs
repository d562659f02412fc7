//! PostgreSQL for pad's end-to-end fault tests: the scratch databases every
//! crate's tests share (`pad_test_support::pg`), `psql`, and a private
//! cluster of the PostgreSQL 15 binaries that can be stopped and started.

use std::path::{Path, PathBuf};
use std::process::Command;

pub use pad_test_support::pg::{ENV, ScratchDb};
const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// Runs one SQL statement with `psql` against `url`; panics on failure.
pub fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .unwrap_or_else(|e| panic!("cannot run psql: {e}"));
    assert!(out.status.success(), "psql {sql:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A PostgreSQL cluster of the test's own, on its own port, so it can be
/// stopped and started without disturbing anything else.
pub struct PrivateCluster {
    dir: PathBuf,
    port: u16,
}

fn as_postgres(dir: &Path, program: &str, args: &[&str]) -> std::process::Output {
    Command::new("runuser")
        .args(["-u", "postgres", "--", &format!("{PG_BIN}/{program}")])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

impl PrivateCluster {
    /// A started cluster; `None` when the PostgreSQL 15 binaries or
    /// `runuser` are missing.
    pub fn init() -> Option<PrivateCluster> {
        let tools_present = Path::new(PG_BIN).join("initdb").exists()
            && Command::new("runuser").arg("--help").output().is_ok()
            && Command::new("id").args(["-u", "postgres"]).output().is_ok_and(|o| o.status.success());
        if !tools_present {
            return None;
        }
        let dir = std::env::temp_dir().join(format!("pad-pg-{:016x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        // postgres refuses to run as root: the cluster belongs to `postgres`.
        let chown = Command::new("chown").args(["postgres:postgres", dir.to_str().unwrap()]).status().unwrap();
        assert!(chown.success(), "chown {}", dir.display());
        let out = as_postgres(&dir, "initdb", &["-D", "data", "-U", "postgres", "-A", "trust", "--no-sync"]);
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let cluster = PrivateCluster { dir, port };
        cluster.start();
        Some(cluster)
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub fn start(&self) {
        let opts = format!("-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off", self.port, self.dir.display());
        let out = as_postgres(&self.dir, "pg_ctl", &["-D", "data", "-l", "log", "-o", &opts, "-w", "start"]);
        assert!(out.status.success(), "pg_ctl start: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Like a crash: no shutdown checkpoint, connections cut.
    pub fn stop(&self) {
        let out = as_postgres(&self.dir, "pg_ctl", &["-D", "data", "-m", "immediate", "-w", "stop"]);
        assert!(out.status.success(), "pg_ctl stop: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = as_postgres(&self.dir, "pg_ctl", &["-D", "data", "-m", "immediate", "-w", "stop"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
