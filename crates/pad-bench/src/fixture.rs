//! A fresh store behind a real in-process `pad serve` on loopback, and a
//! direct database connection beside it for bulk seeding and the raw-SQL
//! reference cycle.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use pad_client::{Client, Url};
use pad_core::Workspace;
use pad_store::{Actor, Store};
use serde::Serialize;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{AssertSqlSafe, ConnectOptions};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::Result;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// The database under the store, reached without it.
#[derive(Clone)]
pub enum Db {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

pub struct Fixture {
    pub backend: Backend,
    pub store: Arc<dyn Store>,
    pub client: Client,
    /// The bootstrap owner, who owns every bench workspace.
    pub owner: Actor,
    /// The bootstrap owner's token, for more clients (and more instances).
    pub token: String,
    pub db: Db,
    /// Where the fresh Postgres database lives, for peers and for the drop.
    pub database_url: Option<String>,
    /// How every connection to that database is made, as [`one_tls_mode`] left it.
    pub tls: Option<String>,
    /// The server's metrics, read in-process (the pickup scenario waits on
    /// its waiting-claim-next gauge).
    metrics: Arc<pad_server::metrics::Metrics>,
    server: JoinHandle<std::io::Result<()>>,
    stop: oneshot::Sender<()>,
    cleanup: Cleanup,
}

enum Cleanup {
    /// The temp dir holding the SQLite file; removed on drop.
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres {
        admin: PgPool,
        name: String,
    },
}

/// Makes pad and every peer connect to Postgres the same way: the drivers'
/// defaults differ (pgqueuer's asyncpg uses TLS when the server offers it,
/// node-postgres under graphile-worker and pg-boss does not, pad not on its
/// own host: docs/benchmarks.md, "Connections: one TLS mode for everyone").
/// A `sslmode` the URL names is kept; otherwise `sslmode=disable` is added.
/// Returns the mode.
fn one_tls_mode(url: &mut Url) -> String {
    if let Some((_, mode)) = url.query_pairs().find(|(k, _)| k == "sslmode") {
        return format!("sslmode={mode} (from --database-url)");
    }
    url.query_pairs_mut().append_pair("sslmode", "disable");
    "sslmode=disable (added by the bench; name sslmode in --database-url to choose)".into()
}

/// Fresh SQLite files use the store's own settings (WAL, `synchronous=NORMAL`).
fn sqlite_options(path: &std::path::Path) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(30))
        .disable_statement_logging()
}

impl Fixture {
    /// A new SQLite file in a temp dir, removed when the fixture is.
    pub async fn sqlite() -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("pad-bench-").tempdir()?;
        let path = dir.path().join("pad.db");
        let store = pad_backends::open_store(&format!("sqlite://{}", path.display())).await?;
        let db = SqlitePoolOptions::new().max_connections(1).connect_with(sqlite_options(&path)).await?;
        Self::start(Backend::Sqlite, store, Db::Sqlite(db), None, Cleanup::Sqlite(dir)).await
    }

    /// A new database `pad_bench_<pid>_<millis>` on the server `admin_url`
    /// names, dropped by [`finish`](Self::finish).
    pub async fn postgres(admin_url: &str) -> Result<Self> {
        let admin_opts: PgConnectOptions = admin_url.parse()?;
        let admin =
            PgPoolOptions::new().max_connections(1).connect_with(admin_opts.disable_statement_logging()).await?;
        let millis = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis();
        let name = format!("pad_bench_{}_{millis}", std::process::id());
        sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&admin).await?;
        let mut url = Url::parse(admin_url)?;
        url.set_path(&format!("/{name}"));
        let tls = one_tls_mode(&mut url);
        let cleanup = Cleanup::Postgres { admin, name };
        let store = pad_backends::open_store(url.as_str()).await?;
        let opts: PgConnectOptions = url.as_str().parse()?;
        // Up to 64 for the raw-SQL cycle, closed soon after: idle ones would
        // count against the server's max_connections when the peers run.
        let db = PgPoolOptions::new()
            .max_connections(64)
            .idle_timeout(Duration::from_secs(1))
            .connect_with(opts.disable_statement_logging())
            .await?;
        let mut fx = Self::start(Backend::Postgres, store, Db::Postgres(db), Some(url.to_string()), cleanup).await?;
        fx.tls = Some(tls);
        Ok(fx)
    }

    async fn start(
        backend: Backend, store: Arc<dyn Store>, db: Db, database_url: Option<String>, cleanup: Cleanup,
    ) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let boot = pad_server::bootstrap(&*store).await?.ok_or("the fresh store already had users")?;
        let owner = Actor { user_id: store.ensure_user(&boot.email).await?.id };
        let (stop, stopped) = oneshot::channel::<()>();
        let state = unlimited(store.clone());
        let metrics = state.metrics.clone();
        let server = tokio::spawn(pad_server::serve_state(state, listener, async move {
            let _ = stopped.await;
        }));
        let client = Client::new(Url::parse(&format!("http://{addr}"))?, boot.token.clone())?;
        Ok(Fixture {
            backend,
            store,
            client,
            owner,
            token: boot.token,
            db,
            database_url,
            tls: None,
            metrics,
            server,
            stop,
            cleanup,
        })
    }

    /// One more `pad serve` instance over the same Postgres database, with
    /// a store (and a connection pool) of its own, as another process would
    /// have: a pool of `max_connections` and `lanes` lease lanes, one of a
    /// fleet sized as docs/operations.md says. Its client carries the
    /// owner's token.
    pub async fn sized_instance(&self, max_connections: u32, lanes: usize) -> Result<Instance> {
        let url = self.database_url.as_deref().ok_or("more instances need the Postgres backend")?;
        let store = pad_backends::open_postgres_sized(url, max_connections, lanes).await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(pad_server::serve_state(unlimited(store), listener, async move {
            let _ = stopped.await;
        }));
        let client = Client::new(Url::parse(&format!("http://{addr}"))?, self.token.clone())?;
        Ok(Instance { client, server, stop })
    }

    /// A client of the fixture's server with a connection pool of its own,
    /// for a measured load: the connections it opens are made, and driven,
    /// on the runtime that uses it (the load generator's), so none made
    /// earlier on the server's runtime carries the load (docs/benchmarks.md,
    /// "CPU per item").
    pub fn fresh_client(&self) -> Result<Client> {
        Ok(Client::new(self.client.base_url().clone(), self.token.clone())?)
    }

    /// Claim-nexts waiting for work on the fixture's server now.
    pub fn waiting(&self) -> u64 {
        self.metrics.waiting_now()
    }

    /// A new workspace for one measurement, so frontiers never mix.
    pub async fn workspace(&self, slug: &str) -> Result<Workspace> {
        Ok(self.store.create_workspace(slug, slug, self.owner).await?)
    }

    /// Inserts `n` open `task` items straight into the items table (one
    /// `INSERT … SELECT` over a generated series, as the migrations define
    /// the table) and moves the kind's counter past them. Returns their
    /// numbers: the refs are `TASK-<n>`.
    pub async fn seed(&self, ws: &Workspace, n: u64) -> Result<Range<i64>> {
        let n = i64::try_from(n)?;
        let now = self.store.now().await?;
        match &self.db {
            Db::Sqlite(pool) => {
                let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                let first: i64 =
                    sqlx::query_scalar("SELECT next_number FROM kinds WHERE workspace_id = ? AND prefix = 'TASK'")
                        .bind(ws.id)
                        .fetch_one(&mut *tx)
                        .await?;
                let last = first + n - 1;
                sqlx::query(
                    "WITH RECURSIVE seq(x) AS (SELECT ?1 UNION ALL SELECT x + 1 FROM seq WHERE x < ?2)
                     INSERT INTO items (workspace_id, prefix, number, kind, title, body, status, priority,
                                        created_by, created_at, updated_at)
                     SELECT ?3, 'TASK', x, 'task', 'bench item ' || x, '', 'open', 1, ?4, ?5 + x, ?5 + x FROM seq",
                )
                .bind(first)
                .bind(last)
                .bind(ws.id)
                .bind(self.owner.user_id)
                .bind(now.timestamp_micros())
                .execute(&mut *tx)
                .await?;
                sqlx::query("UPDATE kinds SET next_number = ? WHERE workspace_id = ? AND prefix = 'TASK'")
                    .bind(last + 1)
                    .bind(ws.id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(first..last + 1)
            }
            Db::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                let first: i64 = sqlx::query_scalar(
                    "SELECT next_number FROM kinds WHERE workspace_id = $1 AND prefix = 'TASK' FOR UPDATE",
                )
                .bind(ws.id)
                .fetch_one(&mut *tx)
                .await?;
                let last = first + n - 1;
                sqlx::query(
                    "INSERT INTO items (workspace_id, prefix, number, kind, title, body, status, priority,
                                        created_by, created_at, updated_at)
                     SELECT $3, 'TASK', x, 'task', 'bench item ' || x, '', 'open', 1, $4,
                            $5 + x * interval '1 microsecond', $5 + x * interval '1 microsecond'
                     FROM generate_series($1::bigint, $2::bigint) AS x",
                )
                .bind(first)
                .bind(last)
                .bind(ws.id)
                .bind(self.owner.user_id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                sqlx::query("UPDATE kinds SET next_number = $1 WHERE workspace_id = $2 AND prefix = 'TASK'")
                    .bind(last + 1)
                    .bind(ws.id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                sqlx::query("ANALYZE items").execute(pool).await?;
                Ok(first..last + 1)
            }
        }
    }

    /// Stops the server and removes the store (the temp file, or the database).
    pub async fn finish(self) -> Result<()> {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), self.server).await;
        match &self.db {
            Db::Sqlite(p) => p.close().await,
            Db::Postgres(p) => p.close().await,
        }
        drop(self.store);
        if let Cleanup::Postgres { admin, name } = self.cleanup {
            sqlx::query(AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))).execute(&admin).await?;
            admin.close().await;
        }
        Ok(())
    }
}

/// A further server started by [`Fixture::instance`].
pub struct Instance {
    pub client: Client,
    server: JoinHandle<std::io::Result<()>>,
    stop: oneshot::Sender<()>,
}

impl Instance {
    pub async fn finish(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), self.server).await;
    }
}

/// The ref of seeded item number `n`.
pub fn task_ref(n: i64) -> String {
    format!("TASK-{n}")
}

/// [`task_ref`] as the store takes it.
pub fn task_item_ref(n: i64) -> pad_core::ItemRef {
    pad_core::ItemRef { prefix: "TASK".into(), number: n }
}

/// This process's resident set and its peak, in MiB, from /proc/self/status.
/// The server runs in-process, so this is server *and* load generator.
pub fn process_rss_mib() -> Option<(f64, f64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024.0)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// A server's state without the per-user request rate limit: every bench
/// client is the one owner, and the limit (docs/api.md, "Limits") would
/// measure itself instead of the server.
fn unlimited(store: Arc<dyn Store>) -> pad_server::AppState {
    let mut state = pad_server::AppState::new(store);
    state.rate = pad_server::limits::RateLimiter::new(None);
    // The webhooks scenario's dead receivers are on loopback: let the
    // attempts reach them, as a private-network install would.
    state.webhook_targets = pad_server::webhooks::Targets { allow_private: true };
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_connection_gets_one_tls_mode() {
        let mut plain = Url::parse("postgres://postgres@127.0.0.1:5432/pad_bench_1").unwrap();
        assert!(one_tls_mode(&mut plain).starts_with("sslmode=disable (added"));
        assert_eq!(plain.as_str(), "postgres://postgres@127.0.0.1:5432/pad_bench_1?sslmode=disable");

        let mut named = Url::parse("postgres://postgres@db.internal/pad_bench_1?sslmode=require&user=pad").unwrap();
        assert_eq!(one_tls_mode(&mut named), "sslmode=require (from --database-url)");
        assert_eq!(named.as_str(), "postgres://postgres@db.internal/pad_bench_1?sslmode=require&user=pad");
    }
}
