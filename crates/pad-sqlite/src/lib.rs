//! pad's embedded store: one SQLite file in WAL mode.
//!
//! Writes go through a single connection and each one is a `BEGIN IMMEDIATE`
//! transaction, so a write never starts on a stale read and contention waits
//! on the busy timeout instead of failing. The lease rules themselves come
//! from `pad_core::lease`: each lease operation reads the item's lease slot
//! under the write lock, asks the rule, and writes its answer. Reads use a
//! separate pool of read-only connections.
//!
//! The modules mirror `pad-postgres`'s, file for file: `accounts` (users,
//! workspaces, members, tokens, sessions, kinds), `items`, `leases`,
//! `events`, `rows`. Operations whose flow is the same on both backends are
//! `pad_store::steps`, over the steps [`Tx`] implements here.

mod accounts;
mod broken;
mod clock;
mod events;
mod items;
mod leases;
mod rows;
mod settings;
mod webhooks;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pad_core::lease::LeaseHandle;
use pad_core::{
    Comment, Event, EventFilter, FrontierFilter, Item, ItemFilter, ItemPatch, ItemRef, Kind, Lease, Member, NewItem,
    Page, Principal, Role, Timestamp, TokenInfo, User, Version, Workspace,
};
use pad_store::clock::{SystemWall, Wall};
use pad_store::steps::{self, Begin, WriteTx};
use pad_store::{
    Actor, ClaimOutcome, ClaimRequest, CompleteRequest, FailOutcome, FailRequest, ObservedExpiry, ReleaseOutcome,
    ReleaseRequest, RenewRequest, Store, StoreError, StoreResult,
};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool};

use clock::Clock;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    clock: Clock,
}

/// Maps a driver error once, at this crate's boundary.
fn db(e: sqlx::Error) -> StoreError {
    match &e {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
            StoreError::Unavailable(e.to_string())
        }
        sqlx::Error::Database(d) if d.message().contains("database is locked") || d.message().contains("busy") => {
            StoreError::Unavailable(e.to_string())
        }
        _ => StoreError::Internal(e.to_string()),
    }
}

/// `PAD_SQLITE_SYNCHRONOUS` (docs/operations.md, "SQLite durability"):
/// `normal` (the default) loses no committed write to a crash of pad, and
/// may lose the last ones to a power cut; `full` syncs every commit, so a
/// power cut loses nothing acknowledged either, at the cost of one fsync
/// per write.
fn synchronous(setting: Option<&str>) -> StoreResult<SqliteSynchronous> {
    match setting.map(str::to_ascii_lowercase).as_deref() {
        None | Some("normal") => Ok(SqliteSynchronous::Normal),
        Some("full") => Ok(SqliteSynchronous::Full),
        Some(v) => Err(StoreError::invalid("PAD_SQLITE_SYNCHRONOUS", format!("{v:?} is not normal or full"))),
    }
}

/// A write transaction: the write lock is held, and `now` was read once it
/// was, so time order is commit order (`clock.rs`).
pub struct Tx {
    conn: sqlx::Transaction<'static, Sqlite>,
    now: Timestamp,
}

#[async_trait]
impl Begin for SqliteStore {
    type Tx = Tx;

    /// `BEGIN IMMEDIATE` takes the write lock up front.
    async fn begin(&self) -> StoreResult<Tx> {
        let conn = self.writer.begin_with("BEGIN IMMEDIATE").await.map_err(db)?;
        Ok(Tx { conn, now: self.clock.tick() })
    }
}

#[async_trait]
impl WriteTx for Tx {
    async fn commit(self) -> StoreResult<()> {
        self.conn.commit().await.map_err(db)
    }

    async fn rollback(self) {
        // Frees the write lock now; an error here leaves the rollback to sqlx.
        let _ = self.conn.rollback().await;
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

    async fn open_inner(path: &Path, wall: Arc<dyn Wall>, sync: SqliteSynchronous) -> StoreResult<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Unavailable(format!("cannot create {}: {e}", dir.display())))?;
        }
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(sync)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts.clone())
            .await
            .map_err(db)?;
        MIGRATOR.run(&writer).await.map_err(|e| StoreError::Internal(format!("migrations: {e}")))?;
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts.read_only(true))
            .await
            .map_err(db)?;
        Ok(SqliteStore { writer, reader, clock: Clock::new(wall) })
    }

    /// Accepts `sqlite://PATH`, `sqlite:PATH` or a plain path.
    pub async fn open_url(url: &str) -> StoreResult<Self> {
        let path = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")).unwrap_or(url);
        Self::open(Path::new(path)).await
    }

    pub async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }
}

/// Each method is one line: the module that holds it, or the shared flow in
/// `pad_store::steps`. `pad-postgres/src/lib.rs` reads the same.
#[async_trait]
impl Store for SqliteStore {
    async fn now(&self) -> StoreResult<Timestamp> {
        Ok(self.clock.read())
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
        steps::insert_token(self, user, name, hash, None).await
    }

    async fn create_scoped_token(
        &self,
        user: Actor,
        name: &str,
        hash: &str,
        ws: &Workspace,
        role: Role,
    ) -> StoreResult<TokenInfo> {
        steps::insert_token(self, user, name, hash, Some((ws.id, role))).await
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
        steps::complete(self, ws, r, req).await
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
    async fn log_webhook_test(
        &self,
        ws: &Workspace,
        id: i64,
        result: &pad_store::AttemptResult,
    ) -> StoreResult<pad_core::webhook::WebhookDelivery> {
        webhooks::log_test(self, ws, id, result).await
    }
}

#[cfg(test)]
mod tests {
    use pad_store::StoreError;
    use sqlx::sqlite::SqliteSynchronous;

    #[test]
    fn synchronous_is_normal_unless_full_is_asked_for() {
        assert!(matches!(super::synchronous(None), Ok(SqliteSynchronous::Normal)));
        assert!(matches!(super::synchronous(Some("normal")), Ok(SqliteSynchronous::Normal)));
        assert!(matches!(super::synchronous(Some("FULL")), Ok(SqliteSynchronous::Full)));
        let Err(StoreError::Validation(e)) = super::synchronous(Some("off")) else { panic!("off is refused") };
        assert_eq!(e.field, "PAD_SQLITE_SYNCHRONOUS");
    }

    /// The cost of `synchronous=FULL` (docs/operations.md): claim + release
    /// cycles on one item, one caller, each mode on its own fresh store.
    /// Run by hand: `cargo test -p pad-sqlite --release -- --ignored --nocapture synchronous_cost`.
    #[tokio::test]
    #[ignore]
    async fn synchronous_cost() {
        use pad_core::NewItem;
        use pad_store::{Actor, ClaimRequest, ReleaseRequest, Store};
        const CYCLES: u32 = 500;
        for sync in [SqliteSynchronous::Normal, SqliteSynchronous::Full, SqliteSynchronous::Normal] {
            let dir = tempfile::tempdir().unwrap();
            let wall = std::sync::Arc::new(pad_store::clock::SystemWall);
            let s = super::SqliteStore::open_inner(&dir.path().join("pad.db"), wall, sync).await.unwrap();
            let owner = Actor { user_id: s.ensure_user("o@example.com").await.unwrap().id };
            let ws = s.create_workspace("w", "W", owner).await.unwrap();
            let new = NewItem { title: "one".into(), ..Default::default() };
            let r = s.create_item(&ws, owner, &new).await.unwrap().item_ref;
            let claim = ClaimRequest {
                actor: owner,
                holder: "h".into(),
                session_id: None,
                ttl_seconds: Some(60),
                note: None,
                refresh: true,
            };
            let release = ReleaseRequest {
                actor: owner,
                holder: "h".into(),
                handle: Default::default(),
                force: false,
                reason: None,
            };
            let started = std::time::Instant::now();
            for _ in 0..CYCLES {
                s.claim(&ws, &r, &claim).await.unwrap();
                s.release(&ws, &r, &release).await.unwrap();
            }
            let per = started.elapsed() / CYCLES;
            println!("synchronous={sync:?}: {per:?} per claim+release ({} writes/s)", 2e6 / per.as_micros() as f64);
        }
    }
}
