//! pad's embedded store: one SQLite file in WAL mode.
//!
//! Every write runs on one connection, owned by the group-commit writer
//! (`writer.rs`): each write flow is a savepoint inside a batch
//! transaction taken with `BEGIN IMMEDIATE`, and a batch commits as soon as
//! the connection is free, so a write never starts on a stale read and
//! concurrent writers share commits. The lease rules themselves come from
//! `pad_core::lease`: each lease operation reads the item's lease slot
//! inside its flow, asks the rule, and writes its answer. Reads use a few
//! read-only connections (`readers.rs`). The schema is migrated by sqlx's
//! migrator when the store opens; everything after runs on rusqlite
//! (`sql.rs`).
//!
//! The modules mirror `pad-postgres`'s, file for file: `accounts` (users,
//! workspaces, members, tokens, sessions, kinds), `items`, `leases`,
//! `events`, `rows`. Operations whose flow is the same on both backends are
//! `pad_store::steps`, over the steps [`Tx`] implements here.

mod accounts;
mod broken;
mod checkpoint;
mod clock;
mod events;
mod imports;
mod items;
mod leases;
mod readers;
mod rows;
mod sql;
mod webhooks;
mod writer;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pad_core::Timestamp;
use pad_store::clock::{SystemWall, Wall};
use pad_store::steps::{Begin, WriteTx};
use pad_store::{Backend, StoreError, StoreResult};
use rusqlite::{Connection, OpenFlags};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

pub use checkpoint::WAL_HARD_BYTES;
use clock::Clock;
use readers::Readers;
use sql::db;
pub use writer::Tx;
use writer::Writer;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Read connections beside the writer: reads are short, and the server's
/// two cores rarely run more at once.
const READERS: usize = 4;

/// How long a statement waits for another process's lock before the store
/// answers "unavailable".
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

pub struct SqliteStore {
    writer: Writer,
    _checkpointer: checkpoint::Checkpointer,
    readers: Readers,
    clock: Clock,
}

/// `PAD_SQLITE_SYNCHRONOUS` (docs/operations.md, "SQLite durability"):
/// `normal` (the default) loses no committed write to a crash of pad, and
/// may lose the last ones to a power cut; `full` syncs every commit, so a
/// power cut loses nothing acknowledged either, at the cost of one fsync
/// per batch of writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Synchronous {
    Normal,
    Full,
}

fn synchronous(setting: Option<&str>) -> StoreResult<Synchronous> {
    match setting.map(str::to_ascii_lowercase).as_deref() {
        None | Some("normal") => Ok(Synchronous::Normal),
        Some("full") => Ok(Synchronous::Full),
        Some(v) => Err(StoreError::invalid("PAD_SQLITE_SYNCHRONOUS", format!("{v:?} is not normal or full"))),
    }
}

#[async_trait]
impl Begin for SqliteStore {
    type Tx = Tx;

    async fn begin(&self) -> StoreResult<Tx> {
        self.writer.begin(&self.clock).await
    }
}

#[async_trait]
impl WriteTx for Tx {
    async fn commit(self) -> StoreResult<()> {
        Tx::commit(self).await
    }

    async fn rollback(self) -> StoreResult<()> {
        Tx::rollback(self).await
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and applies migrations.
    pub async fn open(path: &Path) -> StoreResult<Self> {
        Self::open_with_clock(path, Arc::new(SystemWall)).await
    }

    /// Like [`open`](Self::open), with the store's clock reading `wall`
    /// instead of the system clock (tests move it forward instead of sleeping).
    pub async fn open_with_clock(path: &Path, wall: Arc<dyn Wall>) -> StoreResult<Self> {
        let sync = synchronous(std::env::var("PAD_SQLITE_SYNCHRONOUS").ok().as_deref())?;
        Self::open_inner(path, wall, sync).await
    }

    async fn open_inner(path: &Path, wall: Arc<dyn Wall>, sync: Synchronous) -> StoreResult<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Unavailable(format!("cannot create {}: {e}", dir.display())))?;
        }
        migrate(path).await?;
        let conn = open_conn(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        let pragma = match sync {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        };
        conn.pragma_update(None, "synchronous", pragma).map_err(db)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(db)?;
        // Checkpoints are the checkpointer's (`checkpoint.rs`), not the commits'.
        conn.pragma_update(None, "wal_autocheckpoint", 0).map_err(db)?;
        let gate = checkpoint::Gate::default();
        let writer = Writer::start(conn, sync == Synchronous::Normal, Arc::clone(&gate))?;
        let checkpointer =
            checkpoint::Checkpointer::start(open_conn(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?, path, writer.clone())?;
        let readers =
            (0..READERS).map(|_| open_conn(path, OpenFlags::SQLITE_OPEN_READ_ONLY)).collect::<StoreResult<Vec<_>>>()?;
        Ok(SqliteStore {
            writer,
            _checkpointer: checkpointer,
            readers: Readers::start(readers, &gate)?,
            clock: Clock::new(wall),
        })
    }

    /// Accepts `sqlite://PATH`, `sqlite:PATH` or a plain path.
    pub async fn open_url(url: &str) -> StoreResult<Self> {
        let path = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")).unwrap_or(url);
        Self::open(Path::new(path)).await
    }

    /// Commits what is pending and refuses further reads.
    pub async fn close(&self) {
        self.writer.flush().await;
        self.readers.close();
    }

    /// Runs `f` on a read connection.
    async fn read<T: Send + 'static>(
        &self, f: impl FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        self.readers.read(f).await
    }
}

/// Creates the file in WAL mode and brings its schema up to date, on a
/// connection of its own that closes before the store opens its own.
async fn migrate(path: &Path) -> StoreResult<()> {
    let opts = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true);
    let unavailable = |e: sqlx::Error| StoreError::Unavailable(format!("cannot open {}: {e}", path.display()));
    // A pool of one rather than a bare connection: the migrator's future is
    // then `Send`, as a store's opening must be.
    let pool = SqlitePoolOptions::new().max_connections(1).connect_with(opts).await.map_err(unavailable)?;
    let migrated = MIGRATOR.run(&pool).await.map_err(|e| StoreError::Internal(format!("migrations: {e}")));
    pool.close().await;
    migrated
}

fn open_conn(path: &Path, mode: OpenFlags) -> StoreResult<Connection> {
    let conn = Connection::open_with_flags(path, mode | OpenFlags::SQLITE_OPEN_NO_MUTEX).map_err(db)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(db)?;
    // The hot statements of every flow stay prepared.
    conn.set_prepared_statement_cache_capacity(128);
    Ok(conn)
}

/// SQLite's own parts of the store: its clock, read under the write lock
/// by each write flow. Everything else of `Store` is `pad_store`'s, over
/// the steps and operations this crate's modules implement.
#[async_trait]
impl Backend for SqliteStore {
    async fn now(&self) -> StoreResult<Timestamp> {
        Ok(self.clock.read())
    }
}

#[cfg(test)]
mod tests {
    use super::Synchronous;
    use pad_store::StoreError;

    #[test]
    fn synchronous_is_normal_unless_full_is_asked_for() {
        assert!(matches!(super::synchronous(None), Ok(Synchronous::Normal)));
        assert!(matches!(super::synchronous(Some("normal")), Ok(Synchronous::Normal)));
        assert!(matches!(super::synchronous(Some("FULL")), Ok(Synchronous::Full)));
        let Err(StoreError::Validation(e)) = super::synchronous(Some("off")) else { panic!("off is refused") };
        assert_eq!(e.field, "PAD_SQLITE_SYNCHRONOUS");
    }

    /// The cost of `synchronous=FULL` (docs/operations.md): claim + release
    /// cycles, by 1 and by 64 concurrent callers (each on its own item),
    /// each mode on its own fresh store, in one run.
    /// Run by hand: `cargo test -p pad-sqlite --release --lib -- --ignored --nocapture synchronous_cost`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore]
    async fn synchronous_cost() {
        use pad_core::NewItem;
        use pad_store::{Actor, ClaimRequest, ReleaseRequest, Store};
        const SECONDS: f64 = 3.0;
        for callers in [1_usize, 64] {
            for sync in [Synchronous::Normal, Synchronous::Full, Synchronous::Normal] {
                let dir = tempfile::tempdir().unwrap();
                let wall = std::sync::Arc::new(pad_store::clock::SystemWall);
                let s = super::SqliteStore::open_inner(&dir.path().join("pad.db"), wall, sync).await.unwrap();
                let s = std::sync::Arc::new(s);
                let owner = Actor { user_id: s.ensure_user("o@example.com").await.unwrap().id };
                let ws = s.create_workspace("w", "W", owner).await.unwrap();
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(SECONDS);
                let mut tasks = Vec::new();
                for c in 0..callers {
                    let new = NewItem { title: format!("item {c}"), ..Default::default() };
                    let r = s.create_item(&ws, owner, &new).await.unwrap().item_ref;
                    let (s, ws) = (std::sync::Arc::clone(&s), ws.clone());
                    tasks.push(tokio::spawn(async move {
                        let claim = ClaimRequest {
                            actor: owner,
                            holder: format!("h{c}"),
                            session_id: None,
                            ttl_seconds: Some(60),
                            note: None,
                            refresh: true,
                            max_hold_seconds: None,
                        };
                        let release = ReleaseRequest {
                            actor: owner,
                            holder: format!("h{c}"),
                            handle: Default::default(),
                            force: false,
                            reason: None,
                            succeeded: false,
                        };
                        let mut cycles = 0_u64;
                        while std::time::Instant::now() < deadline {
                            s.claim(&ws, &r, &claim).await.unwrap();
                            s.release(&ws, &r, &release).await.unwrap();
                            cycles += 1;
                        }
                        cycles
                    }));
                }
                let mut cycles = 0;
                for t in tasks {
                    cycles += t.await.unwrap();
                }
                #[allow(clippy::cast_precision_loss)]
                let rate = cycles as f64 / SECONDS;
                println!("synchronous={sync:?}, {callers} callers: {rate:.0} claim+release cycles/s");
            }
        }
    }
}
