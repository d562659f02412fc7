//! pad's PostgreSQL store: many `pad serve` instances may share one database.
//!
//! Every lease decision is one statement on the database's clock, so
//! instances never consult their own clocks and never need to agree with each
//! other: the statement locks the item row (`FOR UPDATE`, which under READ
//! COMMITTED waits for and returns the latest committed version), reads
//! `clock_timestamp()` once the lock is held, and writes only if the lease
//! predicate holds (a complete sent alone reads first without the lock and
//! writes only if the row is still as read: docs/leases.md, "One call, one
//! statement"). The rule's *meaning* still lives in `pad_core::lease`: each
//! answer is replayed through it, and a statement that disagrees with the
//! rule fails the call (rolled back in a transaction; a statement sent
//! alone has committed). Event rows are written with the change they
//! record, in its statement or its transaction.
//!
//! Why `clock_timestamp()` and not `now()`: `now()` is the transaction's
//! start, which precedes the lock wait. A claim that waited for a release
//! would be stamped before the release it waited for, so two leases'
//! intervals could overlap. Time read after the lock follows commit order,
//! as the SQLite backend's clock does under its write lock.

//!
//! The modules mirror `pad-sqlite`'s, file for file: `accounts` (users,
//! workspaces, members, tokens, sessions, kinds), `items`, `leases`,
//! `events`, `rows`. Operations whose flow is the same on both backends are
//! `pad_store::steps`, over the steps [`Tx`] implements here.

/// The columns a lease decision reads of an item's row (`rows::locked`):
/// what [`locked_item!`] locks, and what a claim's unlocked first read sees.
macro_rules! lease_row {
    () => {
        "id, deleted_at, lease_holder, lease_user_id, lease_session_id, lease_epoch, lease_acquired_at,
        lease_renewed_at, lease_expires_at, lease_ttl_seconds, lease_hold_until, lease_note, lease_note_holder,
        lease_id, lease_note_lease_id"
    };
}

/// Locks an item's row and then reads the clock: `prev` is the latest
/// committed version (READ COMMITTED re-reads it after any lock wait), `cur`
/// adds `db_now`, taken only once `prev` has produced its locked row. Every
/// lease statement and every fenced write starts with this; given a column
/// list, `prev` reads those columns instead of the lease's.
macro_rules! locked_item {
    () => {
        locked_item!(lease_row!())
    };
    ($cols:expr) => {
        concat!(
            "WITH prev AS MATERIALIZED (
            SELECT ",
            $cols,
            "
            FROM items WHERE workspace_id = $1 AND prefix = $2 AND number = $3
            FOR UPDATE
        ),
        cur AS MATERIALIZED (SELECT prev.*, clock_timestamp() AS db_now FROM prev)"
        )
    };
}

/// The columns an item read adds to the item row `$i`'s own (parent,
/// assignee, creator, comment count, blockers): `rows::ITEM_SELECT` and the
/// statements that return the item they wrote share them, so every item read
/// agrees. Each is a subquery on a key rather than a join: a join carries
/// the whole item row through one more plan node per table, and building
/// those wide nodes is a large share of what a lease statement costs
/// PostgreSQL (docs/benchmarks.md, "An answer's joined columns as subqueries").
/// A blocker's ref is looked up by its key for each `item_blockers` row, not
/// joined: a join's method is chosen from the statistics, and a plan made
/// while `items` looked empty (a new database, before autovacuum's first
/// analyze) scanned every item on every read (docs/operations.md, "Plans
/// on a new database").
macro_rules! item_joined_columns {
    ($i:literal) => {
        concat!(
            "(SELECT p.prefix FROM items p WHERE p.id = ",
            $i,
            ".parent_id) AS parent_prefix,
        (SELECT p.number FROM items p WHERE p.id = ",
            $i,
            ".parent_id) AS parent_number,
        (SELECT a.email FROM users a WHERE a.id = ",
            $i,
            ".assignee_id) AS assignee_email,
        (SELECT c.email FROM users c WHERE c.id = ",
            $i,
            ".created_by) AS creator_email,
        (SELECT COUNT(*) FROM comments cm WHERE cm.item_id = ",
            $i,
            ".id) AS comments_count,
        ARRAY(SELECT (SELECT b.prefix || '-' || b.number FROM items b WHERE b.id = ib.blocker_id)
          FROM item_blockers ib WHERE ib.item_id = ",
            $i,
            ".id ORDER BY ib.blocker_id) AS blocked_by,
        ARRAY(SELECT o.r FROM (SELECT (SELECT b.prefix || '-' || b.number FROM items b WHERE b.id = ib.blocker_id
                AND b.deleted_at IS NULL AND b.status NOT IN ('done', 'cancelled')) AS r
            FROM item_blockers ib WHERE ib.item_id = ",
            $i,
            ".id ORDER BY ib.blocker_id) o WHERE o.r IS NOT NULL) AS blocked_by_open"
        )
    };
}

/// This transaction's event id range and the next free index in it, as the
/// CTEs `tx` and `slot` (see `EVENTS_PER_TRANSACTION` in events.rs).
macro_rules! event_slot {
    () => {
        "tx AS (SELECT pg_current_xact_id()::text::bigint * 65536 AS base),
        slot AS (
            SELECT tx.base,
                COALESCE((SELECT max(id) FROM events WHERE id >= tx.base AND id < tx.base + 65536) - tx.base + 1, 0) AS n
            FROM tx
        )"
    };
}

/// The event visibility horizon (docs/api.md, "Event order on PostgreSQL")
/// as the CTEs `snap` and `horizon` (`horizon.below`: the ids a reader may
/// serve are below it), given the parameter `$p`: the transactions another
/// backend type or another database owns (`events::foreign_xids`), which never
/// write pad's events. Every other transaction running at the statement's
/// snapshot may, and the oldest sets the horizon (none: the snapshot's
/// `xmax`). `pg_current_snapshot()` is the statement's snapshot, taken
/// before the statement runs, so the owners must come from an earlier
/// statement: read in this one, a transaction of another database that
/// ended after the snapshot would be unknown and hold the horizon back,
/// hiding events already committed. One that starts after the owners were
/// read is unknown either way and only counts, which is safe.
macro_rules! event_horizon {
    ($p:literal) => {
        concat!(
            "snap AS MATERIALIZED (SELECT pg_current_snapshot() AS s),
    horizon AS MATERIALIZED (
        SELECT COALESCE(
            (SELECT min(x::text::bigint) FROM snap, pg_snapshot_xip(snap.s) AS x
             WHERE NOT (xid(x)::text::bigint = ANY(",
            $p,
            "::bigint[]))),
            (SELECT pg_snapshot_xmax(snap.s)::text::bigint FROM snap)
        ) * 65536 AS below
    )"
        )
    };
}

/// Queues the events a statement inserted (the CTE `ev`: `id`,
/// `workspace_id`, `type`) for every subscription of their workspace that
/// wants their type, in the same statement: the outbox rows commit or roll
/// back with the events (docs/webhooks.md, "Outbox").
macro_rules! enqueue_events {
    () => {
        "queued AS (
            INSERT INTO webhook_outbox (webhook_id, event_id, next_attempt_at)
            SELECT w.id, ev.id, clock_timestamp()
            FROM ev JOIN webhooks w ON w.workspace_id = ev.workspace_id
            WHERE cardinality(w.event_types) = 0 OR ev.type = ANY(w.event_types)
            ORDER BY ev.id, w.id
        )"
    };
}

mod accounts;
#[macro_use]
mod broken;
mod connect;
mod events;
mod group;
mod imports;
mod items;
mod leases;
mod peek;
mod ready;
mod rows;
mod vacuum;
mod webhooks;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pad_core::{ItemRef, Timestamp};
use pad_store::steps::{Begin, WriteTx};
use pad_store::{Backend, StoreError, StoreResult};
use sqlx::Postgres;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

pub use group::GroupStats;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Pool size per instance unless `PAD_PG_MAX_CONNECTIONS` says otherwise.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;
/// Connections lease calls' shared transactions use at once unless
/// `PAD_PG_LEASE_LANES` says otherwise (`group.rs`): about one per database
/// core, so that concurrent calls wait for the next transaction and share it
/// rather than each take a lane (docs/operations.md, "Sizing the PostgreSQL
/// pool").
pub(crate) const DEFAULT_LEASE_LANES: usize = 2;
/// How long a request waits for a connection before answering `unavailable`.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);
/// A pooled connection idle for longer is pinged before it is handed out.
const IDLE_PING_AFTER: Duration = Duration::from_secs(1);

type PingFuture<'c> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<bool, sqlx::Error>> + Send + 'c>>;

/// The pool's `before_acquire`: an error closes the connection and the
/// pool hands out another one.
fn ping_if_idle(conn: &mut sqlx::PgConnection, meta: sqlx::pool::PoolConnectionMetadata) -> PingFuture<'_> {
    Box::pin(async move {
        if meta.idle_for > IDLE_PING_AFTER {
            sqlx::Connection::ping(conn).await?;
        }
        Ok(true)
    })
}

/// How pad connects to the database `url` names: as the URL says, except
/// that a database on this host is reached without TLS unless the URL or
/// `PGSSLMODE` names a mode (`connect.rs`). Every connection pad makes
/// (the store's pools, its listener, `pad db migrate`) starts here.
pub async fn connect_options(url: &str) -> StoreResult<PgConnectOptions> {
    let given = PgConnectOptions::from_str(url)
        .map_err(|e| StoreError::invalid("database_url", format!("not a PostgreSQL URL: {e}")))?;
    Ok(match connect::plain_first(url, &given) {
        Some(plain) => connect::choose(plain, given).await,
        None => given,
    })
}

pub struct PgStore {
    pool: PgPool,
    /// Lease calls that share a transaction (`group.rs`).
    group: Arc<group::Group>,
    /// Wake-ups for long polls from every instance (`ready.rs`).
    ready: Arc<ready::Ready>,
    /// Claims' unlocked reads, shared per item (`peek.rs`).
    peeks: Arc<peek::Peeks>,
    /// The dead index entries a drain and webhook deliveries leave, cleared
    /// as they go (`vacuum.rs`).
    vacuum: Arc<vacuum::Vacuum>,
}

/// Maps a driver error once, at this crate's boundary. Anything that says
/// "the database is not reachable right now" is `Unavailable` (HTTP 503,
/// CLI exit 8); the pool reconnects by itself once it is back.
fn db(e: sqlx::Error) -> StoreError {
    let transient = match &e {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::BeginFailed => true,
        // 08: connection exceptions; 53: out of connections or memory; 57P0x:
        // shutdown, crash, or not accepting connections yet; 40001/40P01:
        // serialization failure or deadlock, which a retry resolves.
        sqlx::Error::Database(d) => d.code().is_some_and(|c| {
            c.starts_with("08") || c.starts_with("53") || c.starts_with("57P") || c == "40001" || c == "40P01"
        }),
        _ => false,
    };
    if transient { StoreError::Unavailable(e.to_string()) } else { StoreError::Internal(e.to_string()) }
}

/// A write transaction. Rows are locked as they are read (`FOR UPDATE`),
/// and each lock's statement reads the database clock after taking it.
pub struct Tx {
    conn: sqlx::Transaction<'static, Postgres>,
    /// Items whose rows this transaction has locked. A statement that
    /// starts once a row is locked sees every commit that wrote to the item
    /// under that lock, so what it reads about the item is current.
    locked: Vec<ItemRef>,
}

impl Tx {
    /// Whether this transaction has locked the row of `r` (a transaction
    /// writes in one workspace).
    fn holds_ref(&self, r: &ItemRef) -> bool {
        self.locked.contains(r)
    }

    fn hold(&mut self, r: &ItemRef) {
        if !self.holds_ref(r) {
            self.locked.push(r.clone());
        }
    }
}

#[async_trait]
impl Begin for PgStore {
    type Tx = Tx;

    async fn begin(&self) -> StoreResult<Tx> {
        Tx::begin_on(&self.pool).await
    }
}

#[async_trait]
impl WriteTx for Tx {
    async fn commit(self) -> StoreResult<()> {
        self.conn.commit().await.map_err(db)
    }

    async fn rollback(self) -> StoreResult<()> {
        // Drops the row locks now rather than when the pool recycles the
        // connection. What was read was committed (read committed), so it
        // stands whatever the rollback's fate.
        let _ = self.conn.rollback().await;
        Ok(())
    }
}

fn max_connections_from_env() -> StoreResult<u32> {
    count_from_env("PAD_PG_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS)
}

/// A positive count from the environment variable `name`, else `default`.
fn count_from_env<N: FromStr + PartialOrd + From<u8> + std::fmt::Display>(name: &str, default: N) -> StoreResult<N> {
    number_from_env(name, default, N::from(1))
}

/// A whole number of at least `min` from the environment variable `name`, else `default`.
fn number_from_env<N: FromStr + PartialOrd + std::fmt::Display>(name: &str, default: N, min: N) -> StoreResult<N> {
    std::env::var(name).map_or(Ok(default), |v| parse_number(name, &v, min))
}

fn parse_number<N: FromStr + PartialOrd + std::fmt::Display>(name: &str, v: &str, min: N) -> StoreResult<N> {
    v.parse::<N>()
        .ok()
        .filter(|n| *n >= min)
        .ok_or_else(|| StoreError::invalid(name, format!("{v:?} is not a whole number of at least {min}")))
}

/// How `PAD_PG_MAX_CONNECTIONS` is shared: the lease calls' shared
/// transactions get `lanes` connections, at most half (and at least one),
/// and everything else the rest (at least one). Returns (rest, lanes).
fn split_pool(max_connections: u32, lanes: usize) -> (u32, u32) {
    let lanes = u32::try_from(lanes).unwrap_or(u32::MAX).min(max_connections / 2).max(1);
    (max_connections.saturating_sub(lanes).max(1), lanes)
}

/// A pool of at most `size` connections.
fn pool_options(size: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        // Pings a pooled connection before use if it sat idle, so
        // connections that died with a database restart are replaced
        // instead of failing a request. sqlx pings every connection as it
        // returns to the pool, so one back within IDLE_PING_AFTER was alive
        // just now: pinging it again would cost each request a round trip.
        .test_before_acquire(false)
        .before_acquire(ping_if_idle)
}

impl PgStore {
    /// Connects to `postgres://…` / `postgresql://…`, applies migrations, and
    /// pools up to `PAD_PG_MAX_CONNECTIONS` (default 16) connections.
    pub async fn open(url: &str) -> StoreResult<Self> {
        Self::open_with(url, max_connections_from_env()?).await
    }

    pub async fn open_with(url: &str, max_connections: u32) -> StoreResult<Self> {
        let lanes = count_from_env("PAD_PG_LEASE_LANES", DEFAULT_LEASE_LANES)?;
        Self::open_sized(url, max_connections, lanes).await
    }

    /// [`open_with`](Self::open_with), the lease lanes given rather than
    /// read from `PAD_PG_LEASE_LANES`: an instance sized for a fleet
    /// (docs/operations.md, "Sizing the PostgreSQL pool").
    pub async fn open_sized(url: &str, max_connections: u32, lanes: usize) -> StoreResult<Self> {
        let vacuum_every = vacuum::every_from_env()?;
        let opts = connect_options(url).await?;
        Self::migrate(&opts).await?;
        let (others, lanes) = split_pool(max_connections, lanes);
        let pool = pool_options(others).connect_lazy_with(opts.clone());
        // The lease calls that share transactions have connections of their
        // own, on which PostgreSQL keeps one plan per statement
        // (docs/operations.md, "Sizing the PostgreSQL pool").
        let lease_pool =
            pool_options(lanes).connect_lazy_with(opts.clone().options([("plan_cache_mode", "force_generic_plan")]));
        Ok(PgStore {
            group: group::Group::new(lease_pool, usize::try_from(lanes).unwrap_or(1)),
            peeks: peek::Peeks::new(pool.clone()),
            pool,
            vacuum: vacuum::Vacuum::new(opts.clone(), vacuum_every),
            ready: ready::Ready::new(opts),
        })
    }

    /// Runs migrations on a one-connection pool of their own. sqlx's migrator
    /// holds a session-level advisory lock (`pg_advisory_lock`, keyed by the
    /// database name) while it works, so instances starting at once apply
    /// each migration exactly once; should it fail half-way, closing this
    /// pool ends the session, so the lock never rides into the serving pool.
    async fn migrate(opts: &PgConnectOptions) -> StoreResult<()> {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(opts.clone())
            .await
            .map_err(db)?;
        let result = MIGRATOR.run(&pool).await;
        pool.close().await;
        result.map_err(|e| match e {
            sqlx::migrate::MigrateError::Execute(e) => db(e),
            e => StoreError::Internal(format!("migrations: {e}")),
        })
    }

    /// What the lease calls' shared transactions have done (`group.rs`).
    pub fn group_stats(&self) -> GroupStats {
        self.group.stats()
    }

    /// For tests: the plan PostgreSQL keeps for each statement the lease
    /// calls' connections run, by name, claim-next's built for `ws` and
    /// `req` (docs/operations.md, "Plans on a new database").
    #[doc(hidden)]
    pub async fn lease_plans(
        &self, ws: &pad_core::Workspace, req: &pad_store::ClaimRequest,
    ) -> StoreResult<Vec<(&'static str, String)>> {
        leases::lease_plans(self.group.pool(), ws, req).await
    }

    /// For tests: lease calls queue and none runs until [`PgStore::unhold_group`].
    #[doc(hidden)]
    pub fn hold_group(&self) {
        self.group.hold();
    }

    /// For tests: how many lease calls are queued.
    #[doc(hidden)]
    pub fn queued_calls(&self) -> usize {
        self.group.queued()
    }

    /// For tests: runs the calls queued while held.
    #[doc(hidden)]
    pub fn unhold_group(&self) {
        self.group.unhold();
    }

    /// For tests: vacuum every `every` lease calls and deliveries from now on
    /// (0: never), instead of `PAD_PG_VACUUM_EVERY` (`vacuum.rs`).
    #[doc(hidden)]
    pub fn set_vacuum_every(&self, every: u64) {
        self.vacuum.set_every(every);
    }

    /// For tests: waits until this instance has finished `n` vacuums;
    /// how many of those it finished failed.
    #[doc(hidden)]
    pub async fn vacuums_finished(&self, n: u64) -> u64 {
        self.vacuum.finished(n).await
    }

    /// For tests: how many unlocked reads claims have made (`peek.rs`).
    #[doc(hidden)]
    pub fn claim_reads(&self) -> u64 {
        self.peeks.made()
    }

    /// For tests: while held, a claim's unlocked read, once run, waits
    /// before it answers.
    #[doc(hidden)]
    pub fn hold_claim_reads(&self, held: bool) {
        self.peeks.hold(held);
    }

    /// For tests: (claims waiting for the next read, reads paused).
    #[doc(hidden)]
    pub fn claim_reads_waiting(&self) -> (usize, u64) {
        self.peeks.waiting_and_paused()
    }

    /// Tests: whether the database notifies this instance's waiters now
    /// (`ready.rs`).
    #[doc(hidden)]
    pub fn ready_armed(&self) -> bool {
        self.ready.armed()
    }

    /// Tests: how long this instance stays armed after its last waiter left.
    #[doc(hidden)]
    pub fn set_ready_linger(&self, linger: std::time::Duration) {
        self.ready.set_linger(linger)
    }

    /// For tests: claims waiting for another claim's turn at a row lock.
    #[doc(hidden)]
    pub fn claim_turns_waiting(&self) -> usize {
        self.peeks.waiting_for_turns()
    }

    pub async fn close(&self) {
        self.pool.close().await;
        self.group.close().await;
    }
}

/// PostgreSQL's own parts of the store: the database's clock, and the
/// `pad_ready` notifications of other instances' commits (`ready.rs`).
/// Everything else of `Store` is `pad_store`'s, over the steps and
/// operations this crate's modules implement.
#[async_trait]
impl Backend for PgStore {
    async fn now(&self) -> StoreResult<Timestamp> {
        sqlx::query_scalar("SELECT clock_timestamp()").fetch_one(&self.pool).await.map_err(db)
    }

    fn ready_signals(&self) -> Option<pad_store::ReadySignals> {
        Some(self.ready.subscribe())
    }

    async fn arm_ready_signals(&self) -> bool {
        self.ready.arm().await
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_lease_lanes_take_at_most_half_of_the_connections() {
        use super::split_pool;
        assert_eq!(split_pool(16, 4), (12, 4));
        assert_eq!(split_pool(6, 4), (3, 3));
        assert_eq!(split_pool(4, 1), (3, 1));
        assert_eq!(split_pool(2, 4), (1, 1));
        assert_eq!(split_pool(1, 4), (1, 1), "one each at least");
    }

    #[test]
    fn pool_and_lane_counts_are_positive_numbers() {
        assert_eq!(super::parse_number::<usize>("PAD_PG_LEASE_LANES", "4", 1).unwrap(), 4);
        for bad in ["0", "-1", "four", "", "1.5"] {
            let e = super::parse_number::<usize>("PAD_PG_LEASE_LANES", bad, 1).unwrap_err();
            assert!(e.to_string().contains("PAD_PG_LEASE_LANES"), "{bad}: {e}");
        }
    }
}
