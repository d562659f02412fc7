//! Scratch PostgreSQL databases, the one home for every crate's tests.
//! `PAD_TEST_DATABASE_URL` names a server (e.g.
//! `postgres://postgres@127.0.0.1:5432/postgres`); each test gets its own
//! `pad_t_<unix secs>_<random>` database there, dropped when the guard goes
//! (also on panic). Databases left by killed runs are dropped by a later
//! run once they are an hour old. Without the variable, `create` answers
//! `None` and the caller skips, loudly. [`PrivateCluster`] is a server of
//! a test's own, for tests that stop and start it.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};

pub const ENV: &str = "PAD_TEST_DATABASE_URL";
pub const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// A database that lives as long as this guard.
pub struct ScratchDb {
    pub url: String,
    pub name: String,
    admin: PgConnectOptions,
}

fn unix_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs()
}

/// Runs `f` to completion on a runtime of its own thread: usable from
/// synchronous tests, from `Drop`, and inside another runtime, which cannot
/// be blocked on.
fn on_own_runtime<T: Send + 'static>(f: impl Future<Output = T> + Send + 'static) -> T {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a test runtime").block_on(f)
    })
    .join()
    .expect("the scratch database thread panicked")
}

/// `url` with its database name replaced by `name`, and nothing added, so
/// `psql` takes it as well as pad does.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let (server, _) = base.rsplit_once('/').filter(|(s, _)| s.contains("//")).unwrap_or((base, ""));
    match query {
        Some(q) => format!("{server}/{name}?{q}"),
        None => format!("{server}/{name}"),
    }
}

impl ScratchDb {
    /// `None` when no server is configured: the caller skips, loudly.
    pub async fn create() -> Option<ScratchDb> {
        let base = std::env::var(ENV).ok().filter(|u| !u.is_empty())?;
        let admin: PgConnectOptions = base.parse().unwrap_or_else(|e| panic!("{ENV}={base:?} is not a URL: {e}"));
        let mut conn = admin.connect().await.unwrap_or_else(|e| panic!("cannot reach {ENV}={base:?}: {e}"));
        drop_stale(&mut conn).await;
        let name = format!("pad_t_{}_{:016x}", unix_secs(), rand::random::<u64>());
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await.unwrap();
        let _ = conn.close().await;
        Some(ScratchDb { url: with_database(&base, &name), name, admin })
    }

    /// [`create`](Self::create) for synchronous callers.
    pub fn create_blocking() -> Option<ScratchDb> {
        on_own_runtime(Self::create())
    }

    /// Ends every connection to this database; answers how many were ended.
    pub fn terminate_backends(&self) -> usize {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        on_own_runtime(async move {
            let mut conn = admin.connect().await.expect("the scratch server answers");
            let ended: i64 = sqlx::query_scalar(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                 WHERE datname = $1 AND pid <> pg_backend_pid()",
            )
            .bind(name)
            .fetch_one(&mut conn)
            .await
            .expect("pg_terminate_backend");
            let _ = conn.close().await;
            usize::try_from(ended).unwrap_or(0)
        })
    }
}

async fn drop_stale(conn: &mut PgConnection) {
    let names: Vec<String> = sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 'pad\\_t\\_%'")
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    let hour_ago = unix_secs().saturating_sub(3600);
    for name in names {
        let born = name.split('_').nth(2).and_then(|s| s.parse::<u64>().ok());
        if born.is_some_and(|b| b < hour_ago) {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                .execute(&mut *conn)
                .await;
        }
    }
}

impl Drop for ScratchDb {
    /// `FORCE` ends the connections the test's pools may still be closing.
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let dropped = on_own_runtime(async move {
            let mut conn = admin.connect().await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                .execute(&mut conn)
                .await?;
            conn.close().await
        });
        if let Err(e) = dropped {
            eprintln!("could not drop scratch database {}: {e}", self.name);
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
        Self::init_with(false)
    }

    /// A started cluster that accepts TCP connections only over TLS (a
    /// self-signed certificate, `hostssl` lines alone in `pg_hba.conf`);
    /// `None` as for [`PrivateCluster::init`], or without `openssl`.
    pub fn init_tls_only() -> Option<PrivateCluster> {
        Command::new("openssl").arg("version").output().ok()?;
        Self::init_with(true)
    }

    fn init_with(tls_only: bool) -> Option<PrivateCluster> {
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
        if tls_only {
            let data = dir.join("data");
            let made = Command::new("openssl")
                .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"])
                .args(["-keyout", "server.key", "-out", "server.crt"])
                .current_dir(&data)
                .output()
                .unwrap();
            assert!(made.status.success(), "openssl: {}", String::from_utf8_lossy(&made.stderr));
            // postgres reads its key only when no one else may.
            let own = Command::new("chown")
                .args(["postgres:postgres", "server.key", "server.crt"])
                .current_dir(&data)
                .status();
            let private = Command::new("chmod").args(["600", "server.key"]).current_dir(&data).status();
            assert!(own.unwrap().success() && private.unwrap().success(), "the certificate's owner and mode");
            let mut conf = std::fs::OpenOptions::new().append(true).open(data.join("postgresql.conf")).unwrap();
            std::io::Write::write_all(&mut conf, b"\nssl = on\n").unwrap();
            std::fs::write(data.join("pg_hba.conf"), "local all all trust\nhostssl all all 127.0.0.1/32 trust\n")
                .unwrap();
        }
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
