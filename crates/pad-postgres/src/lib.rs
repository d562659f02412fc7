//! pad's PostgreSQL store: many `pad serve` instances may share one database.
//!
//! Every lease decision is one statement on the database's clock, so
//! instances never consult their own clocks and never need to agree with each
//! other: the statement locks the item row (`FOR UPDATE`, which under READ
//! COMMITTED waits for and returns the latest committed version), reads
//! `clock_timestamp()` once the lock is held, and writes only if the lease
//! predicate holds. The rule's *meaning* still lives in `pad_core::lease`:
//! each answer is replayed through it, and a statement that disagrees with
//! the rule is rolled back instead of committed. Event rows are written in
//! the same transaction as the change they record.
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

/// Locks an item's row and then reads the clock: `prev` is the latest
/// committed version (READ COMMITTED re-reads it after any lock wait), `cur`
/// adds `db_now`, taken only once `prev` has produced its locked row. Every
/// lease statement and every fenced write starts with this; given a column
/// list, `prev` reads those columns instead of the lease's.
macro_rules! locked_item {
    () => {
        locked_item!(
            "id, deleted_at, lease_holder, lease_user_id, lease_session_id, lease_epoch, lease_acquired_at,
                   lease_renewed_at, lease_expires_at, lease_ttl_seconds, lease_hold_until, lease_note, lease_note_holder,
                   lease_id, lease_note_lease_id"
        )
    };
    ($cols:literal) => {
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
/// assignee, creator, comment count, blockers), with the joins of
/// [`item_joins!`]: `rows::ITEM_SELECT` and the statements that return the
/// item they wrote share them, so every item read agrees.
macro_rules! item_joined_columns {
    ($i:literal) => {
        concat!(
            "p.prefix AS parent_prefix, p.number AS parent_number, a.email AS assignee_email, c.email AS creator_email,
        (SELECT COUNT(*) FROM comments cm WHERE cm.item_id = ",
            $i,
            ".id) AS comments_count,
        ARRAY(SELECT b.prefix || '-' || b.number FROM item_blockers ib JOIN items b ON b.id = ib.blocker_id
          WHERE ib.item_id = ",
            $i,
            ".id) AS blocked_by,
        ARRAY(SELECT b.prefix || '-' || b.number FROM item_blockers ib JOIN items b ON b.id = ib.blocker_id
          WHERE ib.item_id = ",
            $i,
            ".id AND b.deleted_at IS NULL AND b.status NOT IN ('done', 'cancelled')) AS blocked_by_open"
        )
    };
}

/// The joins [`item_joined_columns!`] reads from.
macro_rules! item_joins {
    ($i:literal) => {
        concat!(
            " LEFT JOIN items p ON p.id = ",
            $i,
            ".parent_id LEFT JOIN users a ON a.id = ",
            $i,
            ".assignee_id LEFT JOIN users c ON c.id = ",
            $i,
            ".created_by"
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
mod broken;
mod events;
mod imports;
mod items;
mod leases;
mod ready;
mod rows;
mod settings;
mod webhooks;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pad_core::lease::LeaseHandle;
use pad_core::{
    Comment, Event, EventFilter, FrontierFilter, Item, ItemFilter, ItemPatch, ItemRef, Kind, Lease, Member, NewItem,
    Page, Principal, Role, Timestamp, TokenInfo, User, Version, Workspace,
};
use pad_store::steps::{self, Begin, WriteTx};
use pad_store::{
    Actor, ClaimOutcome, ClaimRequest, CompleteRequest, FailOutcome, FailRequest, ObservedExpiry, ReleaseOutcome,
    ReleaseRequest, RenewRequest, Store, StoreError, StoreResult,
};
use sqlx::Postgres;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Pool size per instance unless `PAD_PG_MAX_CONNECTIONS` says otherwise.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;
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

pub struct PgStore {
    pool: PgPool,
    /// Wake-ups for long polls from every instance (`ready.rs`).
    ready: Arc<ready::Ready>,
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
    /// The item as the last statement that wrote its row returned it (in
    /// [`ITEM_SELECT`](rows::ITEM_SELECT)'s columns), kept only when that
    /// statement started under this transaction's lock; any other write to
    /// an item drops it. [`load_item`](steps::ItemSteps::load_item) answers
    /// from it instead of reading the row again: one round trip fewer per
    /// claim (docs/benchmarks.md, "Round trips on PostgreSQL").
    item: Option<sqlx::postgres::PgRow>,
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

    /// Called by every statement that writes an item's row or what its
    /// read joins (comments, blockers), before it runs.
    fn forget_item(&mut self) {
        self.item = None;
    }
}

#[async_trait]
impl Begin for PgStore {
    type Tx = Tx;

    async fn begin(&self) -> StoreResult<Tx> {
        Ok(Tx { conn: self.pool.begin().await.map_err(db)?, locked: Vec::new(), item: None })
    }
}

#[async_trait]
impl WriteTx for Tx {
    async fn commit(self) -> StoreResult<()> {
        self.conn.commit().await.map_err(db)
    }

    async fn rollback(self) {
        // Drops the row locks now rather than when the pool recycles the connection.
        let _ = self.conn.rollback().await;
    }
}

fn max_connections_from_env() -> StoreResult<u32> {
    match std::env::var("PAD_PG_MAX_CONNECTIONS") {
        Err(_) => Ok(DEFAULT_MAX_CONNECTIONS),
        Ok(v) => v.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
            StoreError::invalid("PAD_PG_MAX_CONNECTIONS", format!("{v:?} is not a positive number of connections"))
        }),
    }
}

impl PgStore {
    /// Connects to `postgres://…` / `postgresql://…`, applies migrations, and
    /// pools up to `PAD_PG_MAX_CONNECTIONS` (default 16) connections.
    pub async fn open(url: &str) -> StoreResult<Self> {
        Self::open_with(url, max_connections_from_env()?).await
    }

    pub async fn open_with(url: &str, max_connections: u32) -> StoreResult<Self> {
        let opts = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::invalid("database_url", format!("not a PostgreSQL URL: {e}")))?;
        Self::migrate(&opts).await?;
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // Pings a pooled connection before use if it sat idle, so
            // connections that died with a database restart are replaced
            // instead of failing a request. sqlx pings every connection as it
            // returns to the pool, so one back within IDLE_PING_AFTER was alive
            // just now: pinging it again would cost each request a round trip.
            .test_before_acquire(false)
            .before_acquire(ping_if_idle)
            .connect_lazy_with(opts.clone());
        Ok(PgStore { pool, ready: ready::Ready::new(opts) })
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

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Each method is one line: the module that holds it, or the shared flow in
/// `pad_store::steps`. `pad-sqlite/src/lib.rs` reads the same.
#[async_trait]
impl Store for PgStore {
    async fn now(&self) -> StoreResult<Timestamp> {
        sqlx::query_scalar("SELECT clock_timestamp()").fetch_one(&self.pool).await.map_err(db)
    }

    async fn has_users(&self) -> StoreResult<bool> {
        accounts::has_users(self).await
    }

    async fn ensure_user(&self, email: &str) -> StoreResult<User> {
        steps::ensure_user(self, email).await
    }

    async fn create_workspace(&self, slug: &str, name: &str, owner: Actor) -> StoreResult<Workspace> {
        steps::create_workspace(self, slug, name, owner).await
    }

    async fn list_workspaces(&self, user: Actor) -> StoreResult<Vec<(Workspace, Role)>> {
        accounts::list_workspaces(self, user).await
    }

    async fn membership(&self, user: Actor, slug: &str) -> StoreResult<(Workspace, Role)> {
        accounts::membership(self, user, slug).await
    }

    async fn set_member(&self, ws: &Workspace, email: &str, role: Role) -> StoreResult<Member> {
        steps::set_member(self, ws, email, role).await
    }

    async fn list_members(&self, ws: &Workspace) -> StoreResult<Vec<Member>> {
        accounts::list_members(self, ws).await
    }

    async fn remove_member(&self, ws: &Workspace, email: &str) -> StoreResult<()> {
        steps::remove_member(self, ws, email).await
    }

    async fn create_token(&self, user: Actor, name: &str, hash: &str) -> StoreResult<TokenInfo> {
        steps::insert_token(self, user, name, hash, None, user).await
    }

    async fn create_scoped_token(
        &self,
        user: Actor,
        name: &str,
        hash: &str,
        ws: &Workspace,
        role: Role,
        minted_by: Actor,
    ) -> StoreResult<TokenInfo> {
        steps::insert_token(self, user, name, hash, Some((ws.id, role)), minted_by).await
    }

    async fn list_tokens(&self, ws: &Workspace, user: Actor) -> StoreResult<Vec<TokenInfo>> {
        accounts::list_tokens(self, ws, user).await
    }

    async fn get_token(&self, id: i64) -> StoreResult<TokenInfo> {
        accounts::get_token(self, id).await
    }

    async fn revoke_token(&self, id: i64) -> StoreResult<()> {
        accounts::revoke_token(self, id).await
    }

    async fn authenticate(&self, hash: &str) -> StoreResult<Option<Principal>> {
        accounts::authenticate(self, hash).await
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        accounts::user_by_email(self, email).await
    }

    async fn bootstrap(&self, email: &str, slug: &str, name: &str, hash: &str) -> StoreResult<bool> {
        steps::bootstrap(self, email, slug, name, hash).await
    }

    async fn create_session(&self, token_id: i64, hash: &str, ttl_seconds: i64) -> StoreResult<()> {
        accounts::create_session(self, token_id, hash, ttl_seconds).await
    }

    async fn authenticate_session(&self, hash: &str) -> StoreResult<Option<Principal>> {
        accounts::authenticate_session(self, hash).await
    }

    async fn revoke_session(&self, hash: &str) -> StoreResult<()> {
        accounts::revoke_session(self, hash).await
    }

    async fn update_settings(
        &self,
        ws: &Workspace,
        patch: &pad_core::settings::SettingsPatch,
    ) -> StoreResult<Workspace> {
        self.update_settings_tx(ws, patch).await
    }

    async fn list_kinds(&self, ws: &Workspace) -> StoreResult<Vec<Kind>> {
        accounts::list_kinds(self, ws).await
    }

    async fn add_kind(&self, ws: &Workspace, name: &str, prefix: &str) -> StoreResult<Kind> {
        accounts::add_kind(self, ws, name, prefix).await
    }

    async fn create_item(&self, ws: &Workspace, actor: Actor, new: &NewItem) -> StoreResult<Item> {
        steps::create_item(self, ws, actor, new).await
    }

    async fn get_item(&self, ws: &Workspace, r: &ItemRef) -> StoreResult<Item> {
        items::get_item(self, ws, r).await
    }

    async fn list_items(
        &self,
        ws: &Workspace,
        filter: &ItemFilter,
        limit: u32,
        cursor: Option<&str>,
    ) -> StoreResult<Page<Item>> {
        items::list_items(self, ws, filter, limit, cursor).await
    }

    async fn update_item(&self, ws: &Workspace, actor: Actor, r: &ItemRef, patch: &ItemPatch) -> StoreResult<Item> {
        steps::update_item(self, ws, actor, r, patch).await
    }

    async fn delete_item(&self, ws: &Workspace, actor: Actor, r: &ItemRef, fence: LeaseHandle) -> StoreResult<Item> {
        steps::set_deleted(self, ws, actor, r, fence, true).await
    }

    async fn restore_item(&self, ws: &Workspace, actor: Actor, r: &ItemRef) -> StoreResult<Item> {
        steps::set_deleted(self, ws, actor, r, LeaseHandle::default(), false).await
    }

    async fn requeue(&self, ws: &Workspace, actor: Actor, r: &ItemRef) -> StoreResult<Item> {
        steps::requeue(self, ws, actor, r).await
    }

    async fn history(&self, ws: &Workspace, r: &ItemRef) -> StoreResult<Vec<Version>> {
        items::history(self, ws, r).await
    }

    async fn add_comment(&self, ws: &Workspace, actor: Actor, r: &ItemRef, body: &str) -> StoreResult<Comment> {
        steps::add_comment(self, ws, actor, r, body).await
    }

    async fn list_comments(&self, ws: &Workspace, r: &ItemRef) -> StoreResult<Vec<Comment>> {
        items::list_comments(self, ws, r).await
    }

    async fn import(
        &self,
        ws: &Workspace,
        actor: Actor,
        req: &pad_core::api::ImportRequest,
    ) -> StoreResult<pad_core::api::ImportResult> {
        steps::import(self, ws, actor, req).await
    }

    async fn claim(&self, ws: &Workspace, r: &ItemRef, req: &ClaimRequest) -> StoreResult<ClaimOutcome> {
        steps::claim(self, ws, r, req).await
    }

    async fn renew(&self, ws: &Workspace, r: &ItemRef, req: &RenewRequest) -> StoreResult<Lease> {
        leases::renew(self, ws, r, req).await
    }

    async fn release(&self, ws: &Workspace, r: &ItemRef, req: &ReleaseRequest) -> StoreResult<ReleaseOutcome> {
        leases::release(self, ws, r, req).await
    }

    async fn complete(&self, ws: &Workspace, r: &ItemRef, req: &CompleteRequest) -> StoreResult<Item> {
        leases::complete(self, ws, r, req).await
    }

    async fn fail(&self, ws: &Workspace, r: &ItemRef, req: &FailRequest) -> StoreResult<FailOutcome> {
        steps::fail(self, ws, r, req).await
    }

    async fn frontier(&self, ws: &Workspace, filter: &FrontierFilter, limit: u32) -> StoreResult<Vec<Item>> {
        leases::frontier(self, ws, filter, limit).await
    }

    async fn claim_next(
        &self,
        ws: &Workspace,
        filter: &FrontierFilter,
        req: &ClaimRequest,
    ) -> StoreResult<Option<(Item, ClaimOutcome)>> {
        steps::claim_next(self, ws, filter, req).await
    }

    fn ready_signals(&self) -> Option<tokio::sync::broadcast::Receiver<()>> {
        Some(self.ready.subscribe())
    }

    async fn claim_next_many(
        &self,
        ws: &Workspace,
        filter: &FrontierFilter,
        req: &ClaimRequest,
        count: u32,
    ) -> StoreResult<Vec<(Item, ClaimOutcome)>> {
        steps::claim_next_many(self, ws, filter, req, count).await
    }

    async fn observe_expiries(&self) -> StoreResult<Vec<ObservedExpiry>> {
        steps::observe_expiries(self).await
    }

    async fn live_leases(&self) -> StoreResult<Vec<(String, u64)>> {
        leases::live_leases(self).await
    }

    async fn events_where(
        &self,
        ws: &Workspace,
        after: i64,
        limit: u32,
        filter: &EventFilter,
    ) -> StoreResult<Vec<Event>> {
        events::events_where(self, ws, after, limit, filter).await
    }

    // Webhooks: all in webhooks.rs (docs/webhooks.md).
    async fn create_webhook(
        &self,
        ws: &Workspace,
        actor: Actor,
        new: &pad_core::webhook::CreateWebhook,
        secret: &str,
    ) -> StoreResult<pad_core::webhook::Webhook> {
        webhooks::create(self, ws, actor, new, secret).await
    }
    async fn list_webhooks(&self, ws: &Workspace) -> StoreResult<Vec<pad_core::webhook::Webhook>> {
        webhooks::list(self, ws).await
    }
    async fn delete_webhook(&self, ws: &Workspace, id: i64) -> StoreResult<()> {
        webhooks::delete(self, ws, id).await
    }
    async fn webhook_target(&self, ws: &Workspace, id: i64) -> StoreResult<pad_store::WebhookTarget> {
        webhooks::target(self, ws, id).await
    }
    async fn webhook_deliveries(
        &self,
        ws: &Workspace,
        id: i64,
        limit: u32,
    ) -> StoreResult<Vec<pad_core::webhook::WebhookDelivery>> {
        webhooks::deliveries(self, ws, id, limit).await
    }
    async fn claim_webhook_deliveries(
        &self,
        limit: u32,
        hold_seconds: i64,
    ) -> StoreResult<Vec<pad_store::DueDelivery>> {
        webhooks::claim(self, limit, hold_seconds).await
    }
    async fn finish_webhook_delivery(
        &self,
        due: &pad_store::DueDelivery,
        result: &pad_store::AttemptResult,
    ) -> StoreResult<()> {
        webhooks::finish(self, due, result).await
    }
    async fn resume_webhook(&self, ws: &Workspace, id: i64) -> StoreResult<pad_core::webhook::Webhook> {
        webhooks::resume(self, ws, id).await
    }
    async fn trim_webhook_queues(&self, keep: i64) -> StoreResult<u64> {
        webhooks::trim(self, keep).await
    }
    async fn log_webhook_test(
        &self,
        ws: &Workspace,
        id: i64,
        result: &pad_store::AttemptResult,
    ) -> StoreResult<pad_core::webhook::WebhookDelivery> {
        webhooks::log_test(self, ws, id, result).await
    }
}
