//! PostgreSQL for pad's end-to-end fault tests, driven with `psql` and the
//! PostgreSQL 15 binaries (the ideas of `crates/pad-postgres/tests`, without
//! sqlx): a scratch database on the server `PAD_TEST_DATABASE_URL` names, a
//! private cluster that can be stopped and started, and cutting a database's
//! connections with `pg_terminate_backend`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

pub const ENV: &str = "PAD_TEST_DATABASE_URL";
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

/// `url` with its database name replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let (server, _) = base.rsplit_once('/').filter(|(s, _)| s.contains("//")).unwrap_or((base, ""));
    match query {
        Some(q) => format!("{server}/{name}?{q}"),
        None => format!("{server}/{name}"),
    }
}

/// A fresh database `pad_t_<unix secs>_<random>` on the server of
/// `PAD_TEST_DATABASE_URL`, dropped with the guard (the same naming as the
/// pad-postgres tests, whose runs drop ones left behind by killed runs).
pub struct ScratchDb {
    pub url: String,
    pub name: String,
    admin: String,
}

impl ScratchDb {
    /// `None` when `PAD_TEST_DATABASE_URL` is unset: the caller skips, loudly.
    pub fn create() -> Option<ScratchDb> {
        let admin = std::env::var(ENV).ok().filter(|u| !u.is_empty())?;
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs();
        let name = format!("pad_t_{secs}_{:016x}", rand::random::<u64>());
        psql(&admin, &format!("CREATE DATABASE {name}"));
        Some(ScratchDb { url: with_database(&admin, &name), name, admin })
    }

    /// Ends every connection to this database but the caller's; answers how
    /// many were ended.
    pub fn terminate_backends(&self) -> usize {
        let sql = format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = '{}' AND pid <> pg_backend_pid()",
            self.name
        );
        psql(&self.admin, &sql).trim().parse().unwrap_or(0)
    }
}

impl Drop for ScratchDb {
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        let out = Command::new("psql").args([&self.admin, "-X", "-q", "-c", &sql]).output();
        if !out.is_ok_and(|o| o.status.success()) {
            eprintln!("could not drop scratch database {}", self.name);
        }
    }
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
