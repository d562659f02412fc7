//! pad's embedded store: one SQLite file in WAL mode.
//!
//! Writes go through a single connection and each one is a `BEGIN IMMEDIATE`
//! transaction, so a write never starts on a stale read and contention waits
//! on the busy timeout instead of failing. The lease rules themselves come
//! from `pad_core::lease`: each lease operation reads the item's lease slot
//! under the write lock, asks the rule, and writes its answer. Reads use a
//! separate pool of read-only connections.

mod broken;
mod clock;
mod rows;
mod settings;
mod webhooks;

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use pad_core::lease::{self, ClaimDecision, LeaseEnd, LeaseHandle, LeaseSlot, ReleaseDecision, RenewDecision};
use pad_core::model::{DEFAULT_KINDS, validate_kind_name, validate_prefix, validate_slug};
use pad_core::validate::{self, Lines};
use pad_core::{
    Claimant, Comment, Event, EventFilter, EventKind, FrontierFilter, Item, ItemFilter, ItemPatch, ItemRef, Kind,
    LIST_LIMIT_MAX, Lease, Member, NEEDS_HUMAN, NewItem, Page, Principal, Role, Timestamp, TokenInfo, User,
    ValidFrontierFilter, Version, Workspace,
};
use pad_store::{
    Actor, ClaimOutcome, ClaimRequest, CompleteRequest, FailOutcome, FailRequest, ObservedExpiry, ReleaseOutcome,
    ReleaseRequest, RenewRequest, Store, StoreError, StoreResult, shared,
};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{QueryBuilder, Row, Sqlite, SqlitePool};

use clock::Clock;
use rows::{ITEM_SELECT, item_from_row, micros, ts};

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

fn parse_ref(field: &str, s: &str) -> StoreResult<ItemRef> {
    Ok(ItemRef::parse_field(field, s)?)
}

/// The lease slot of an item row, as the rules in `pad_core::lease` want it.
struct Locked {
    id: i64,
    deleted: bool,
    slot: LeaseSlot,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and applies migrations.
    pub async fn open(path: &Path) -> StoreResult<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Unavailable(format!("cannot create {}: {e}", dir.display())))?;
        }
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
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
        Ok(SqliteStore { writer, reader, clock: Clock::default() })
    }

    /// One token insert, under the per-user cap (docs/api.md, "Tokens").
    async fn insert_token(
        &self,
        user: Actor,
        name: &str,
        hash: &str,
        scope: Option<(i64, Role)>,
    ) -> StoreResult<TokenInfo> {
        validate::text("name", name, 1, 200, Lines::Single)?;
        let (mut tx, now) = self.begin().await?;
        let live: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tokens WHERE user_id = ? AND revoked_at IS NULL")
            .bind(user.user_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        shared::too_many_tokens(live)?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO tokens (user_id, name, hash, created_at, workspace_id, role) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(user.user_id)
        .bind(name)
        .bind(hash)
        .bind(micros(now))
        .bind(scope.map(|s| s.0))
        .bind(scope.map(|s| s.1.as_str()))
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        let sql = format!("{} WHERE t.id = ?", rows::TOKEN_SELECT);
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&mut *tx).await.map_err(db)?;
        tx.commit().await.map_err(db)?;
        rows::token_from_row(&row)
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

    /// Begins a write: `BEGIN IMMEDIATE` takes the write lock up front, and
    /// `now` is read only once it is held, so time order is commit order.
    async fn begin(&self) -> StoreResult<(sqlx::Transaction<'static, Sqlite>, Timestamp)> {
        let tx = self.writer.begin_with("BEGIN IMMEDIATE").await.map_err(db)?;
        Ok((tx, self.clock.tick()))
    }

    async fn lock_item(conn: &mut SqliteConnection, ws: &Workspace, r: &ItemRef) -> StoreResult<Locked> {
        let row = sqlx::query(
            "SELECT id, deleted_at, lease_holder, lease_user_id, lease_session_id, lease_epoch, lease_acquired_at,
                    lease_renewed_at, lease_expires_at, lease_ttl_seconds, lease_id
             FROM items WHERE workspace_id = ? AND prefix = ? AND number = ?",
        )
        .bind(ws.id)
        .bind(&r.prefix)
        .bind(r.number)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::not_found(format!("item {r}")))?;
        Ok(Locked {
            id: row.get("id"),
            deleted: row.get::<Option<i64>, _>("deleted_at").is_some(),
            slot: rows::lease_slot(&row)?,
        })
    }

    /// Like [`lock_item`](Self::lock_item) but refuses deleted items: they take no leases.
    async fn lock_live_item(conn: &mut SqliteConnection, ws: &Workspace, r: &ItemRef) -> StoreResult<Locked> {
        let locked = Self::lock_item(conn, ws, r).await?;
        if locked.deleted {
            return Err(StoreError::not_found(format!("item {r} (deleted)")));
        }
        Ok(locked)
    }

    async fn load_item(conn: &mut SqliteConnection, id: i64, now: Timestamp) -> StoreResult<Item> {
        let sql = format!("{ITEM_SELECT} WHERE i.id = ?");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&mut *conn).await.map_err(db)?;
        item_from_row(&row, now)
    }

    async fn item_id(conn: &mut SqliteConnection, ws: &Workspace, field: &str, r: &ItemRef) -> StoreResult<i64> {
        sqlx::query_scalar(
            "SELECT id FROM items WHERE workspace_id = ? AND prefix = ? AND number = ? AND deleted_at IS NULL",
        )
        .bind(ws.id)
        .bind(&r.prefix)
        .bind(r.number)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::invalid(field, format!("{r} does not exist in this workspace")))
    }

    async fn member_id(conn: &mut SqliteConnection, ws: &Workspace, field: &str, email: &str) -> StoreResult<i64> {
        sqlx::query_scalar(
            "SELECT u.id FROM users u JOIN members m ON m.user_id = u.id WHERE m.workspace_id = ? AND u.email = ?",
        )
        .bind(ws.id)
        .bind(email.to_lowercase())
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::invalid(field, format!("{email} is not a member of this workspace")))
    }

    async fn set_blockers(
        conn: &mut SqliteConnection,
        ws: &Workspace,
        item: i64,
        blockers: &[ItemRef],
    ) -> StoreResult<()> {
        sqlx::query("DELETE FROM item_blockers WHERE item_id = ?").bind(item).execute(&mut *conn).await.map_err(db)?;
        for (i, b) in blockers.iter().enumerate() {
            let bid = Self::item_id(conn, ws, &format!("blocked_by[{i}]"), b).await?;
            sqlx::query("INSERT INTO item_blockers (item_id, blocker_id) VALUES (?, ?)")
                .bind(item)
                .bind(bid)
                .execute(&mut *conn)
                .await
                .map_err(db)?;
        }
        Ok(())
    }

    /// The `(item, blocker)` links reachable from `item` through blockers,
    /// for [`shared::check_blockers_acyclic`].
    async fn blocker_edges(conn: &mut SqliteConnection, item: i64) -> StoreResult<Vec<(ItemRef, ItemRef)>> {
        let rows = sqlx::query(
            "WITH RECURSIVE reach(id) AS (SELECT ? UNION SELECT b.blocker_id FROM item_blockers b JOIN reach r ON b.item_id = r.id)
             SELECT i.prefix AS ip, i.number AS inum, j.prefix AS bp, j.number AS bnum
             FROM reach r JOIN item_blockers b ON b.item_id = r.id JOIN items i ON i.id = b.item_id JOIN items j ON j.id = b.blocker_id",
        )
        .bind(item)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
        Ok(rows
            .iter()
            .map(|row| {
                (
                    ItemRef { prefix: row.get("ip"), number: row.get("inum") },
                    ItemRef { prefix: row.get("bp"), number: row.get("bnum") },
                )
            })
            .collect())
    }

    async fn add_version(
        conn: &mut SqliteConnection,
        id: i64,
        actor: Actor,
        changes: serde_json::Map<String, serde_json::Value>,
        now: Timestamp,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO item_versions (item_id, version, actor_id, at, changes)
             VALUES (?, (SELECT COALESCE(MAX(version), 0) + 1 FROM item_versions WHERE item_id = ?), ?, ?, ?)",
        )
        .bind(id)
        .bind(id)
        .bind(actor.user_id)
        .bind(micros(now))
        .bind(serde_json::Value::Object(changes).to_string())
        .execute(&mut *conn)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn event(
        conn: &mut SqliteConnection,
        ws: i64,
        kind: EventKind,
        item_ref: &ItemRef,
        actor: Option<Actor>,
        now: Timestamp,
        data: serde_json::Value,
    ) -> StoreResult<()> {
        sqlx::query("INSERT INTO events (workspace_id, type, item_ref, actor_id, at, data) VALUES (?, ?, ?, ?, ?, ?)")
            .bind(ws)
            .bind(kind.as_str())
            .bind(item_ref.to_string())
            .bind(actor.map(|a| a.user_id))
            .bind(micros(now))
            .bind(data.to_string())
            .execute(&mut *conn)
            .await
            .map_err(db)?;
        webhooks::enqueue(conn, ws, kind, micros(now)).await?;
        Ok(())
    }

    async fn write_lease(conn: &mut SqliteConnection, id: i64, l: &Lease, note: Option<&str>) -> StoreResult<()> {
        sqlx::query(
            "UPDATE items SET lease_holder = ?, lease_user_id = ?, lease_session_id = ?, lease_epoch = ?,
                    lease_acquired_at = ?, lease_renewed_at = ?, lease_expires_at = ?, lease_ttl_seconds = ?,
                    lease_note = COALESCE(?, lease_note),
                    lease_note_holder = CASE WHEN ? IS NULL THEN lease_note_holder ELSE ? END,
                    lease_note_lease_id = CASE WHEN ? IS NULL THEN lease_note_lease_id ELSE ? END,
                    lease_id = ?
             WHERE id = ?",
        )
        .bind(&l.holder)
        .bind(l.user_id)
        .bind(&l.session_id)
        .bind(l.epoch)
        .bind(micros(l.acquired_at))
        .bind(micros(l.renewed_at))
        .bind(micros(l.expires_at))
        .bind(i64::from(l.ttl_seconds))
        .bind(note)
        .bind(note)
        .bind(&l.holder)
        .bind(note)
        .bind(l.lease_id)
        .bind(l.lease_id)
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
        Ok(())
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn now(&self) -> StoreResult<Timestamp> {
        Ok(self.clock.read())
    }

    async fn has_users(&self) -> StoreResult<bool> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users").fetch_one(&self.reader).await.map_err(db)?;
        Ok(n > 0)
    }

    async fn ensure_user(&self, email: &str) -> StoreResult<User> {
        validate::email("email", email)?;
        let (mut tx, now) = self.begin().await?;
        let user = rows::ensure_user(&mut tx, email, now).await?;
        tx.commit().await.map_err(db)?;
        Ok(user)
    }

    async fn create_workspace(&self, slug: &str, name: &str, owner: Actor) -> StoreResult<Workspace> {
        validate_slug("slug", slug)?;
        validate::text("name", name, 1, 200, Lines::Single)?;
        let (mut tx, now) = self.begin().await?;
        let taken: Option<i64> = sqlx::query_scalar("SELECT id FROM workspaces WHERE slug = ?")
            .bind(slug)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
        if taken.is_some() {
            return Err(StoreError::invalid("slug", format!("workspace {slug:?} already exists")));
        }
        let id: i64 =
            sqlx::query_scalar("INSERT INTO workspaces (slug, name, created_at) VALUES (?, ?, ?) RETURNING id")
                .bind(slug)
                .bind(name)
                .bind(micros(now))
                .fetch_one(&mut *tx)
                .await
                .map_err(db)?;
        sqlx::query("INSERT INTO members (workspace_id, user_id, role, added_at) VALUES (?, ?, 'owner', ?)")
            .bind(id)
            .bind(owner.user_id)
            .bind(micros(now))
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        for (kind, prefix) in DEFAULT_KINDS {
            sqlx::query("INSERT INTO kinds (workspace_id, name, prefix) VALUES (?, ?, ?)")
                .bind(id)
                .bind(kind)
                .bind(prefix)
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        let row =
            sqlx::query("SELECT * FROM workspaces WHERE id = ?").bind(id).fetch_one(&mut *tx).await.map_err(db)?;
        let ws = rows::workspace_from_row(&row)?;
        tx.commit().await.map_err(db)?;
        Ok(ws)
    }

    async fn list_workspaces(&self, user: Actor) -> StoreResult<Vec<(Workspace, Role)>> {
        let rows = sqlx::query("SELECT w.*, m.role FROM workspaces w JOIN members m ON m.workspace_id = w.id WHERE m.user_id = ? ORDER BY w.slug")
            .bind(user.user_id)
            .fetch_all(&self.reader)
            .await
            .map_err(db)?;
        rows.iter().map(|r| Ok((rows::workspace_from_row(r)?, rows::role(r)?))).collect()
    }

    async fn membership(&self, user: Actor, slug: &str) -> StoreResult<(Workspace, Role)> {
        validate_slug("workspace", slug)?;
        let row = sqlx::query("SELECT w.*, m.role FROM workspaces w JOIN members m ON m.workspace_id = w.id WHERE m.user_id = ? AND w.slug = ?")
            .bind(user.user_id)
            .bind(slug)
            .fetch_optional(&self.reader)
            .await
            .map_err(db)?
            .ok_or_else(|| StoreError::not_found(format!("workspace {slug}")))?;
        Ok((rows::workspace_from_row(&row)?, rows::role(&row)?))
    }

    async fn set_member(&self, ws: &Workspace, email: &str, role: Role) -> StoreResult<Member> {
        validate::email("email", email)?;
        let (mut tx, now) = self.begin().await?;
        let user = rows::ensure_user(&mut tx, email, now).await?;
        let current: Option<String> =
            sqlx::query_scalar("SELECT role FROM members WHERE workspace_id = ? AND user_id = ?")
                .bind(ws.id)
                .bind(user.id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db)?;
        if current.as_deref() == Some("owner") && role != Role::Owner {
            let owners: i64 =
                sqlx::query_scalar("SELECT COUNT(*) FROM members WHERE workspace_id = ? AND role = 'owner'")
                    .bind(ws.id)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db)?;
            if owners <= 1 {
                return Err(StoreError::invalid("role", "a workspace needs at least one owner"));
            }
        }
        sqlx::query(
            "INSERT INTO members (workspace_id, user_id, role, added_at) VALUES (?, ?, ?, ?)
             ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = excluded.role",
        )
        .bind(ws.id)
        .bind(user.id)
        .bind(role.as_str())
        .bind(micros(now))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let added: i64 = sqlx::query_scalar("SELECT added_at FROM members WHERE workspace_id = ? AND user_id = ?")
            .bind(ws.id)
            .bind(user.id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(Member { email: user.email, role, added_at: ts(added)? })
    }

    async fn list_members(&self, ws: &Workspace) -> StoreResult<Vec<Member>> {
        let rows = sqlx::query("SELECT u.email, m.role, m.added_at FROM members m JOIN users u ON u.id = m.user_id WHERE m.workspace_id = ? ORDER BY m.added_at, u.id")
            .bind(ws.id)
            .fetch_all(&self.reader)
            .await
            .map_err(db)?;
        rows.iter()
            .map(|r| Ok(Member { email: r.get("email"), role: rows::role(r)?, added_at: ts(r.get("added_at"))? }))
            .collect()
    }

    async fn remove_member(&self, ws: &Workspace, email: &str) -> StoreResult<()> {
        validate::email("email", email)?;
        let (mut tx, now) = self.begin().await?;
        let row = sqlx::query(
            "SELECT m.user_id, m.role FROM members m JOIN users u ON u.id = m.user_id WHERE m.workspace_id = ? AND u.email = ?",
        )
        .bind(ws.id)
        .bind(email.to_lowercase())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::not_found(format!("member {email}")))?;
        let user: i64 = row.get("user_id");
        if rows::role(&row)? == Role::Owner {
            let owners: i64 =
                sqlx::query_scalar("SELECT COUNT(*) FROM members WHERE workspace_id = ? AND role = 'owner'")
                    .bind(ws.id)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db)?;
            if owners <= 1 {
                return Err(StoreError::invalid("email", "a workspace needs at least one owner"));
            }
        }
        sqlx::query("DELETE FROM members WHERE workspace_id = ? AND user_id = ?")
            .bind(ws.id)
            .bind(user)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        sqlx::query("UPDATE tokens SET revoked_at = ? WHERE user_id = ? AND workspace_id = ? AND revoked_at IS NULL")
            .bind(micros(now))
            .bind(user)
            .bind(ws.id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(())
    }

    async fn create_token(&self, user: Actor, name: &str, hash: &str) -> StoreResult<TokenInfo> {
        self.insert_token(user, name, hash, None).await
    }

    async fn create_scoped_token(
        &self,
        user: Actor,
        name: &str,
        hash: &str,
        ws: &Workspace,
        role: Role,
    ) -> StoreResult<TokenInfo> {
        self.insert_token(user, name, hash, Some((ws.id, role))).await
    }

    async fn list_tokens(&self, ws: &Workspace, user: Actor) -> StoreResult<Vec<TokenInfo>> {
        let sql = format!(
            "{} WHERE t.revoked_at IS NULL AND (t.workspace_id = ? OR t.user_id = ?) ORDER BY t.id",
            rows::TOKEN_SELECT
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(ws.id)
            .bind(user.user_id)
            .fetch_all(&self.reader)
            .await
            .map_err(db)?;
        rows.iter().map(rows::token_from_row).collect()
    }

    async fn get_token(&self, id: i64) -> StoreResult<TokenInfo> {
        let sql = format!("{} WHERE t.revoked_at IS NULL AND t.id = ?", rows::TOKEN_SELECT);
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.reader)
            .await
            .map_err(db)?
            .ok_or_else(|| StoreError::not_found(format!("token {id}")))?;
        rows::token_from_row(&row)
    }

    async fn revoke_token(&self, id: i64) -> StoreResult<()> {
        let (mut tx, now) = self.begin().await?;
        sqlx::query("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
            .bind(micros(now))
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(())
    }

    async fn authenticate(&self, hash: &str) -> StoreResult<Option<Principal>> {
        let row = sqlx::query(
            "SELECT t.id AS token_id, t.last_used_at, t.workspace_id, t.role AS scope_role, u.id AS user_id, u.email
             FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = ? AND t.revoked_at IS NULL",
        )
        .bind(hash)
        .fetch_optional(&self.reader)
        .await
        .map_err(db)?;
        let Some(row) = row else { return Ok(None) };
        // Record use at most once a minute, so authentication stays off the write path.
        let now = self.clock.read();
        let last: Option<i64> = row.get("last_used_at");
        if last.is_none_or(|l| micros(now) - l > 60_000_000) {
            let (mut tx, now) = self.begin().await?;
            sqlx::query("UPDATE tokens SET last_used_at = ? WHERE id = ?")
                .bind(micros(now))
                .bind(row.get::<i64, _>("token_id"))
                .execute(&mut *tx)
                .await
                .map_err(db)?;
            tx.commit().await.map_err(db)?;
        }
        Ok(Some(rows::principal_from_row(&row)?))
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        validate::email("email", email)?;
        let email = email.to_lowercase();
        let id: Option<i64> = sqlx::query_scalar("SELECT id FROM users WHERE email = ?")
            .bind(&email)
            .fetch_optional(&self.reader)
            .await
            .map_err(db)?;
        Ok(id.map(|id| User { id, email }))
    }

    async fn bootstrap(&self, email: &str, slug: &str, name: &str, hash: &str) -> StoreResult<bool> {
        validate::email("email", email)?;
        validate_slug("slug", slug)?;
        // BEGIN IMMEDIATE: no other writer runs between the check and the inserts.
        let (mut tx, now) = self.begin().await?;
        let users: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users").fetch_one(&mut *tx).await.map_err(db)?;
        if users > 0 {
            return Ok(false);
        }
        let user = rows::ensure_user(&mut tx, email, now).await?;
        shared::failpoint("bootstrap-user");
        let ws: i64 =
            sqlx::query_scalar("INSERT INTO workspaces (slug, name, created_at) VALUES (?, ?, ?) RETURNING id")
                .bind(slug)
                .bind(name)
                .bind(micros(now))
                .fetch_one(&mut *tx)
                .await
                .map_err(db)?;
        sqlx::query("INSERT INTO members (workspace_id, user_id, role, added_at) VALUES (?, ?, 'owner', ?)")
            .bind(ws)
            .bind(user.id)
            .bind(micros(now))
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        for (kind, prefix) in DEFAULT_KINDS {
            sqlx::query("INSERT INTO kinds (workspace_id, name, prefix) VALUES (?, ?, ?)")
                .bind(ws)
                .bind(kind)
                .bind(prefix)
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        shared::failpoint("bootstrap-workspace");
        sqlx::query("INSERT INTO tokens (user_id, name, hash, created_at) VALUES (?, 'bootstrap', ?, ?)")
            .bind(user.id)
            .bind(hash)
            .bind(micros(now))
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        shared::failpoint("bootstrap-token");
        tx.commit().await.map_err(db)?;
        Ok(true)
    }

    async fn create_session(&self, token_id: i64, hash: &str, ttl_seconds: i64) -> StoreResult<()> {
        let (mut tx, now) = self.begin().await?;
        sqlx::query("INSERT INTO sessions (hash, token_id, created_at, expires_at) VALUES (?, ?, ?, ?)")
            .bind(hash)
            .bind(token_id)
            .bind(micros(now))
            .bind(micros(now) + ttl_seconds * 1_000_000)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(())
    }

    async fn authenticate_session(&self, hash: &str) -> StoreResult<Option<Principal>> {
        let row = sqlx::query(
            "SELECT t.id AS token_id, t.workspace_id, t.role AS scope_role, u.id AS user_id, u.email
             FROM sessions s JOIN tokens t ON t.id = s.token_id JOIN users u ON u.id = t.user_id
             WHERE s.hash = ? AND s.revoked_at IS NULL AND s.expires_at > ? AND t.revoked_at IS NULL",
        )
        .bind(hash)
        .bind(micros(self.clock.read()))
        .fetch_optional(&self.reader)
        .await
        .map_err(db)?;
        row.as_ref().map(rows::principal_from_row).transpose()
    }

    async fn revoke_session(&self, hash: &str) -> StoreResult<()> {
        let (mut tx, now) = self.begin().await?;
        sqlx::query("UPDATE sessions SET revoked_at = ? WHERE hash = ? AND revoked_at IS NULL")
            .bind(micros(now))
            .bind(hash)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(())
    }

    async fn update_settings(
        &self,
        ws: &Workspace,
        patch: &pad_core::settings::SettingsPatch,
    ) -> StoreResult<Workspace> {
        self.update_settings_tx(ws, patch).await
    }

    async fn list_kinds(&self, ws: &Workspace) -> StoreResult<Vec<Kind>> {
        let rows = sqlx::query("SELECT name, prefix FROM kinds WHERE workspace_id = ? ORDER BY rowid")
            .bind(ws.id)
            .fetch_all(&self.reader)
            .await
            .map_err(db)?;
        Ok(rows.iter().map(|r| Kind { name: r.get("name"), prefix: r.get("prefix") }).collect())
    }

    async fn add_kind(&self, ws: &Workspace, name: &str, prefix: &str) -> StoreResult<Kind> {
        validate_kind_name("name", name)?;
        validate_prefix("prefix", prefix)?;
        let (mut tx, _) = self.begin().await?;
        let clash: Option<String> =
            sqlx::query_scalar("SELECT name FROM kinds WHERE workspace_id = ? AND (name = ? OR prefix = ?)")
                .bind(ws.id)
                .bind(name)
                .bind(prefix)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db)?;
        if let Some(existing) = clash {
            return Err(StoreError::invalid(
                if existing == name { "name" } else { "prefix" },
                format!("clashes with kind {existing:?}"),
            ));
        }
        sqlx::query("INSERT INTO kinds (workspace_id, name, prefix) VALUES (?, ?, ?)")
            .bind(ws.id)
            .bind(name)
            .bind(prefix)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(Kind { name: name.into(), prefix: prefix.into() })
    }

    async fn create_item(&self, ws: &Workspace, actor: Actor, new: &NewItem) -> StoreResult<Item> {
        let v = new.validate()?;
        let (mut tx, now) = self.begin().await?;
        let prefix: String = sqlx::query_scalar("SELECT prefix FROM kinds WHERE workspace_id = ? AND name = ?")
            .bind(ws.id)
            .bind(&v.kind)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?
            .ok_or_else(|| shared::unknown_kind(&v.kind))?;
        let parent = match &v.parent {
            Some(p) => Some(Self::item_id(&mut tx, ws, "parent", p).await?),
            None => None,
        };
        let assignee = match &v.assignee {
            Some(a) => Some(Self::member_id(&mut tx, ws, "assignee", a).await?),
            None => None,
        };
        let number: i64 = sqlx::query_scalar("UPDATE kinds SET next_number = next_number + 1 WHERE workspace_id = ? AND name = ? RETURNING next_number - 1")
            .bind(ws.id)
            .bind(&v.kind)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO items (workspace_id, prefix, number, kind, title, body, status, priority, labels, parent_id, assignee_id, created_by, created_at, updated_at, not_before)
             VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(ws.id)
        .bind(&prefix)
        .bind(number)
        .bind(&v.kind)
        .bind(&v.title)
        .bind(&v.body)
        .bind(v.priority.rank())
        .bind(serde_json::to_string(&v.labels).expect("labels serialize"))
        .bind(parent)
        .bind(assignee)
        .bind(actor.user_id)
        .bind(micros(now))
        .bind(micros(now))
        .bind(v.not_before.map(micros))
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        Self::set_blockers(&mut tx, ws, id, &v.blocked_by).await?;
        let item = Self::load_item(&mut tx, id, now).await?;
        Self::add_version(&mut tx, id, actor, item.changes_since(None), now).await?;
        Self::event(
            &mut tx,
            ws.id,
            EventKind::ItemCreated,
            &item.item_ref,
            Some(actor),
            now,
            shared::event::created(&item),
        )
        .await?;
        tx.commit().await.map_err(db)?;
        Ok(item)
    }

    async fn get_item(&self, ws: &Workspace, item_ref: &str) -> StoreResult<Item> {
        let r = parse_ref("ref", item_ref)?;
        let sql = format!("{ITEM_SELECT} WHERE i.workspace_id = ? AND i.prefix = ? AND i.number = ?");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(ws.id)
            .bind(&r.prefix)
            .bind(r.number)
            .fetch_optional(&self.reader)
            .await
            .map_err(db)?
            .ok_or_else(|| StoreError::not_found(format!("item {r}")))?;
        item_from_row(&row, self.clock.read())
    }

    async fn list_items(
        &self,
        ws: &Workspace,
        filter: &ItemFilter,
        limit: u32,
        cursor: Option<&str>,
    ) -> StoreResult<Page<Item>> {
        let (after, limit) = shared::list_window(filter, limit, cursor)?;
        let now = self.clock.read();
        let mut qb: QueryBuilder<Sqlite> = QueryBuilder::new(ITEM_SELECT);
        qb.push(" WHERE i.workspace_id = ").push_bind(ws.id).push(" AND i.id > ").push_bind(after);
        if !filter.include_deleted {
            qb.push(" AND i.deleted_at IS NULL");
        }
        push_in(&mut qb, "i.status", filter.status.iter().map(|s| s.as_str().to_string()));
        push_in(&mut qb, "i.kind", filter.kind.iter().map(|k| k.to_ascii_lowercase()));
        push_in(&mut qb, "i.priority", filter.priority.iter().map(|p| p.rank()));
        for l in &filter.labels {
            qb.push(" AND EXISTS (SELECT 1 FROM json_each(i.labels) WHERE value = ").push_bind(l.clone()).push(")");
        }
        if let Some(a) = &filter.assignee {
            qb.push(" AND a.email = ").push_bind(a.to_lowercase());
        }
        if let Some(p) = &filter.parent {
            push_parent(&mut qb, ws, p);
        }
        match filter.leased {
            Some(true) => {
                qb.push(" AND i.lease_holder IS NOT NULL AND i.lease_expires_at > ").push_bind(micros(now));
            }
            Some(false) => {
                qb.push(" AND (i.lease_holder IS NULL OR i.lease_expires_at <= ").push_bind(micros(now)).push(")");
            }
            None => {}
        }
        if let Some(q) = &filter.q {
            let q = q.to_lowercase();
            qb.push(" AND (instr(lower(i.title), ")
                .push_bind(q.clone())
                .push(") > 0 OR instr(lower(i.body), ")
                .push_bind(q)
                .push(") > 0)");
        }
        qb.push(" ORDER BY i.id LIMIT ").push_bind(i64::from(limit) + 1);
        let rows = qb.build().fetch_all(&self.reader).await.map_err(db)?;
        let mut items = Vec::with_capacity(rows.len());
        let mut last_id = 0;
        for row in rows.iter().take(limit as usize) {
            last_id = row.get("id");
            items.push(item_from_row(row, now)?);
        }
        let next_cursor = (rows.len() > limit as usize).then(|| last_id.to_string());
        Ok(Page { items, next_cursor })
    }

    async fn update_item(&self, ws: &Workspace, actor: Actor, item_ref: &str, patch: &ItemPatch) -> StoreResult<Item> {
        let r = parse_ref("ref", item_ref)?;
        let p = patch.validate()?;
        let (mut tx, now) = self.begin().await?;
        let locked = Self::lock_live_item(&mut tx, ws, &r).await?;
        let old = Self::load_item(&mut tx, locked.id, now).await?;
        let Some((new, changes)) = shared::plan_update(&locked.slot, &old, &p, now)? else { return Ok(old) };
        if new.kind != old.kind {
            let known: Option<String> =
                sqlx::query_scalar("SELECT name FROM kinds WHERE workspace_id = ? AND name = ?")
                    .bind(ws.id)
                    .bind(&new.kind)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db)?;
            known.ok_or_else(|| shared::unknown_kind(&new.kind))?;
        }
        let parent = match &new.parent {
            Some(pr) => {
                let pid = Self::item_id(&mut tx, ws, "parent", pr).await?;
                // Refuse cycles: walk up from the new parent.
                let cycle: i64 = sqlx::query_scalar(
                    "WITH RECURSIVE up(id) AS (SELECT ? UNION SELECT i.parent_id FROM items i JOIN up ON i.id = up.id WHERE i.parent_id IS NOT NULL)
                     SELECT COUNT(*) FROM up WHERE id = ?",
                )
                .bind(pid)
                .bind(locked.id)
                .fetch_one(&mut *tx)
                .await
                .map_err(db)?;
                if cycle > 0 {
                    return Err(StoreError::invalid("parent", format!("{pr} is a descendant of {r}")));
                }
                Some(pid)
            }
            None => None,
        };
        let assignee = match &new.assignee {
            Some(a) => Some(Self::member_id(&mut tx, ws, "assignee", a).await?),
            None => None,
        };
        if new.blocked_by != old.blocked_by {
            Self::set_blockers(&mut tx, ws, locked.id, &new.blocked_by).await?;
            // Writers are serialized (BEGIN IMMEDIATE), so no other update can
            // close a cycle between this check and the commit.
            shared::check_blockers_acyclic(&r, &Self::blocker_edges(&mut tx, locked.id).await?)?;
        }
        sqlx::query(
            "UPDATE items SET title = ?, body = ?, kind = ?, status = ?, priority = ?, labels = ?, parent_id = ?, assignee_id = ?,
                    not_before = ?, updated_at = ?, version = version + 1 WHERE id = ?",
        )
        .bind(&new.title)
        .bind(&new.body)
        .bind(&new.kind)
        .bind(new.status.as_str())
        .bind(new.priority.rank())
        .bind(serde_json::to_string(&new.labels).expect("labels serialize"))
        .bind(parent)
        .bind(assignee)
        .bind(new.not_before.map(micros))
        .bind(micros(now))
        .bind(locked.id)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let data = shared::event::updated(&changes);
        Self::add_version(&mut tx, locked.id, actor, changes, now).await?;
        Self::event(&mut tx, ws.id, EventKind::ItemUpdated, &r, Some(actor), now, data).await?;
        let item = Self::load_item(&mut tx, locked.id, now).await?;
        tx.commit().await.map_err(db)?;
        Ok(item)
    }

    async fn requeue(&self, ws: &Workspace, actor: Actor, item_ref: &str) -> StoreResult<Item> {
        let r = parse_ref("ref", item_ref)?;
        let (mut tx, now) = self.begin().await?;
        let locked = Self::lock_live_item(&mut tx, ws, &r).await?;
        let old = Self::load_item(&mut tx, locked.id, now).await?;
        let expiries: i64 = sqlx::query_scalar("SELECT lease_expiries FROM items WHERE id = ?")
            .bind(locked.id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        let Some((new, changes)) = shared::plan_requeue(&old, expiries) else { return Ok(old) };
        sqlx::query(
            "UPDATE items SET labels = ?, lease_expiries = 0, failures = 0, retry_at = NULL, updated_at = ?,
                    version = version + 1 WHERE id = ?",
        )
        .bind(serde_json::to_string(&new.labels).expect("labels serialize"))
        .bind(micros(now))
        .bind(locked.id)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let data = shared::event::updated(&changes);
        Self::add_version(&mut tx, locked.id, actor, changes, now).await?;
        Self::event(&mut tx, ws.id, EventKind::ItemUpdated, &r, Some(actor), now, data).await?;
        let item = Self::load_item(&mut tx, locked.id, now).await?;
        tx.commit().await.map_err(db)?;
        Ok(item)
    }

    async fn delete_item(&self, ws: &Workspace, actor: Actor, item_ref: &str, fence: LeaseHandle) -> StoreResult<Item> {
        self.set_deleted(ws, actor, item_ref, fence, true).await
    }

    async fn restore_item(&self, ws: &Workspace, actor: Actor, item_ref: &str) -> StoreResult<Item> {
        self.set_deleted(ws, actor, item_ref, LeaseHandle::default(), false).await
    }

    async fn history(&self, ws: &Workspace, item_ref: &str) -> StoreResult<Vec<Version>> {
        let r = parse_ref("ref", item_ref)?;
        let id = self.find_id(ws, &r).await?;
        let rows = sqlx::query("SELECT v.version, u.email, v.at, v.changes FROM item_versions v JOIN users u ON u.id = v.actor_id WHERE v.item_id = ? ORDER BY v.version DESC")
            .bind(id)
            .fetch_all(&self.reader)
            .await
            .map_err(db)?;
        rows.iter()
            .map(|row| {
                Ok(Version {
                    version: row.get("version"),
                    actor: row.get("email"),
                    at: ts(row.get("at"))?,
                    changes: serde_json::from_str(row.get("changes"))
                        .map_err(|e| StoreError::Internal(e.to_string()))?,
                })
            })
            .collect()
    }

    async fn add_comment(&self, ws: &Workspace, actor: Actor, item_ref: &str, body: &str) -> StoreResult<Comment> {
        let r = parse_ref("ref", item_ref)?;
        pad_core::model::validate_comment(body)?;
        let (mut tx, now) = self.begin().await?;
        let locked = Self::lock_live_item(&mut tx, ws, &r).await?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO comments (item_id, author_id, body, created_at) VALUES (?, ?, ?, ?) RETURNING id",
        )
        .bind(locked.id)
        .bind(actor.user_id)
        .bind(body)
        .bind(micros(now))
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        Self::event(&mut tx, ws.id, EventKind::CommentCreated, &r, Some(actor), now, shared::event::commented(id))
            .await?;
        let author: String = sqlx::query_scalar("SELECT email FROM users WHERE id = ?")
            .bind(actor.user_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(Comment { id, author, body: body.to_string(), created_at: now })
    }

    async fn list_comments(&self, ws: &Workspace, item_ref: &str) -> StoreResult<Vec<Comment>> {
        let r = parse_ref("ref", item_ref)?;
        let id = self.find_id(ws, &r).await?;
        let rows = sqlx::query("SELECT c.id, u.email, c.body, c.created_at FROM comments c JOIN users u ON u.id = c.author_id WHERE c.item_id = ? ORDER BY c.id")
            .bind(id)
            .fetch_all(&self.reader)
            .await
            .map_err(db)?;
        rows.iter()
            .map(|row| {
                Ok(Comment {
                    id: row.get("id"),
                    author: row.get("email"),
                    body: row.get("body"),
                    created_at: ts(row.get("created_at"))?,
                })
            })
            .collect()
    }

    async fn claim(&self, ws: &Workspace, item_ref: &str, req: &ClaimRequest) -> StoreResult<ClaimOutcome> {
        let r = parse_ref("ref", item_ref)?;
        let ttl = req.validate(&ws.settings)?;
        let (mut tx, now) = self.begin().await?;
        let locked = Self::lock_live_item(&mut tx, ws, &r).await?;
        if let Some(old) = locked.slot.current.as_ref().filter(|l| !l.is_live(now)) {
            Self::record_expiry(&mut tx, ws.id, ws.settings.quarantine_after_expiries, locked.id, &r, old, now).await?;
        }
        let out = Self::claim_locked(&mut tx, ws, &r, &locked, req, ttl, now).await?;
        tx.commit().await.map_err(db)?;
        Ok(out)
    }

    async fn renew(&self, ws: &Workspace, item_ref: &str, req: &RenewRequest) -> StoreResult<Lease> {
        let r = parse_ref("ref", item_ref)?;
        let ttl = req.validate(&ws.settings)?;
        let (mut tx, now) = self.begin().await?;
        let locked = Self::lock_live_item(&mut tx, ws, &r).await?;
        let claimant = Claimant { user_id: req.actor.user_id, holder: &req.holder, session_id: None };
        match lease::decide_renew(&locked.slot, &claimant, req.handle, ttl, now) {
            RenewDecision::Renewed(l) => {
                Self::write_lease(&mut tx, locked.id, &l, req.note.as_deref()).await?;
                tx.commit().await.map_err(db)?;
                Ok(l)
            }
            RenewDecision::Lost(live) => {
                Err(Self::explain_lost(&mut tx, locked.id, req.handle, StoreError::lost(live, now)).await)
            }
            RenewDecision::Held(l) => Err(StoreError::held(l, now)),
        }
    }

    async fn release(&self, ws: &Workspace, item_ref: &str, req: &ReleaseRequest) -> StoreResult<ReleaseOutcome> {
        let r = parse_ref("ref", item_ref)?;
        req.validate()?;
        let (mut tx, now) = self.begin().await?;
        let locked = Self::lock_item(&mut tx, ws, &r).await?;
        let claimant = Claimant { user_id: req.actor.user_id, holder: &req.holder, session_id: None };
        let (lease, kind, reason) = match lease::decide_release(&locked.slot, &claimant, req.handle, req.force, now) {
            ReleaseDecision::NoLiveLease => {
                if let Some(old) = &locked.slot.current {
                    Self::record_expiry(&mut tx, ws.id, ws.settings.quarantine_after_expiries, locked.id, &r, old, now)
                        .await?;
                    Self::clear_lease(&mut tx, locked.id).await?;
                    tx.commit().await.map_err(db)?;
                }
                return Ok(ReleaseOutcome { released: false, reason: "no live lease", lease: None });
            }
            ReleaseDecision::Held(l) => return Err(StoreError::held(l, now)),
            ReleaseDecision::Lost(l) => return Err(StoreError::lost(Some(l), now)),
            ReleaseDecision::Released(l) => (l, LeaseEnd::Released, "released"),
            ReleaseDecision::Broken(l) => (l, LeaseEnd::Broken, "broken"),
        };
        Self::end_lease(&mut tx, locked.id, kind, now).await?;
        if kind == LeaseEnd::Broken {
            Self::record_break(&mut tx, locked.id, &lease, req.reason.as_deref(), req.actor).await?;
        }
        let event = if kind == LeaseEnd::Broken { EventKind::LeaseBroken } else { EventKind::LeaseReleased };
        let data = shared::event::ended(&lease, kind, req.reason.as_deref());
        Self::event(&mut tx, ws.id, event, &r, Some(req.actor), now, data).await?;
        tx.commit().await.map_err(db)?;
        Ok(ReleaseOutcome { released: true, reason, lease: Some(lease) })
    }

    async fn complete(&self, ws: &Workspace, item_ref: &str, req: &CompleteRequest) -> StoreResult<Item> {
        let r = parse_ref("ref", item_ref)?;
        req.validate()?;
        let (mut tx, now) = self.begin().await?;
        let locked = Self::lock_live_item(&mut tx, ws, &r).await?;
        let claimant = Claimant { user_id: req.actor.user_id, holder: &req.holder, session_id: None };
        let lease = match lease::decide_end(&locked.slot, &claimant, req.handle, now) {
            Ok(l) => l,
            Err(e) => return Err(Self::explain_lost(&mut tx, locked.id, req.handle, shared::end_refused(e, now)).await),
        };
        let old = Self::load_item(&mut tx, locked.id, now).await?;
        if old.status != req.status {
            // A content change like any update: one version, `updated_at` moves.
            let new = Item { status: req.status, ..old.clone() };
            let changes = new.changes_since(Some(&old));
            sqlx::query("UPDATE items SET status = ?, updated_at = ?, version = version + 1 WHERE id = ?")
                .bind(req.status.as_str())
                .bind(micros(now))
                .bind(locked.id)
                .execute(&mut *tx)
                .await
                .map_err(db)?;
            let data = shared::event::updated(&changes);
            Self::add_version(&mut tx, locked.id, req.actor, changes, now).await?;
            Self::event(&mut tx, ws.id, EventKind::ItemUpdated, &r, Some(req.actor), now, data).await?;
        }
        Self::end_lease(&mut tx, locked.id, LeaseEnd::Completed, now).await?;
        let data = shared::event::ended(&lease, LeaseEnd::Completed, None);
        Self::event(&mut tx, ws.id, EventKind::LeaseReleased, &r, Some(req.actor), now, data).await?;
        let item = Self::load_item(&mut tx, locked.id, now).await?;
        tx.commit().await.map_err(db)?;
        Ok(item)
    }

    async fn fail(&self, ws: &Workspace, item_ref: &str, req: &FailRequest) -> StoreResult<FailOutcome> {
        let r = parse_ref("ref", item_ref)?;
        let threshold = req.validate(&ws.settings)?;
        let (mut tx, now) = self.begin().await?;
        let locked = Self::lock_live_item(&mut tx, ws, &r).await?;
        let claimant = Claimant { user_id: req.actor.user_id, holder: &req.holder, session_id: None };
        let lease = match lease::decide_end(&locked.slot, &claimant, req.handle, now) {
            Ok(l) => l,
            Err(e) => return Err(Self::explain_lost(&mut tx, locked.id, req.handle, shared::end_refused(e, now)).await),
        };
        let failures: i64 = sqlx::query_scalar("SELECT failures + 1 FROM items WHERE id = ?")
            .bind(locked.id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        let s = &ws.settings;
        let retry_at = now + lease::retry_backoff(failures, s.retry_backoff_base_seconds, s.retry_backoff_max_seconds);
        // The note is the lease's handoff note (L12) and the last failure's.
        let row = sqlx::query(
            "UPDATE items SET failures = ?, retry_at = ?, last_failure_note = ?,
                    lease_note = COALESCE(?, lease_note),
                    lease_note_holder = CASE WHEN ? IS NULL THEN lease_note_holder ELSE lease_holder END,
                    lease_note_lease_id = CASE WHEN ? IS NULL THEN lease_note_lease_id ELSE lease_id END
             WHERE id = ? RETURNING labels",
        )
        .bind(failures)
        .bind(micros(retry_at))
        .bind(&req.note)
        .bind(&req.note)
        .bind(&req.note)
        .bind(&req.note)
        .bind(locked.id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        Self::end_lease(&mut tx, locked.id, LeaseEnd::Failed, now).await?;
        let data = shared::event::failed(&lease, failures, retry_at, req.note.as_deref());
        Self::event(&mut tx, ws.id, EventKind::LeaseFailed, &r, Some(req.actor), now, data).await?;
        let mut labels: Vec<String> =
            serde_json::from_str(row.get("labels")).map_err(|e| StoreError::Internal(e.to_string()))?;
        let quarantined = lease::should_quarantine(failures, threshold, &labels);
        if quarantined {
            labels.push(NEEDS_HUMAN.to_string());
            sqlx::query("UPDATE items SET labels = ? WHERE id = ?")
                .bind(serde_json::to_string(&labels).expect("labels serialize"))
                .bind(locked.id)
                .execute(&mut *tx)
                .await
                .map_err(db)?;
            let data = shared::event::quarantined_failures(failures);
            Self::event(&mut tx, ws.id, EventKind::ItemQuarantined, &r, None, now, data).await?;
        }
        let item = Self::load_item(&mut tx, locked.id, now).await?;
        tx.commit().await.map_err(db)?;
        Ok(FailOutcome { item, quarantined })
    }

    async fn frontier(&self, ws: &Workspace, filter: &FrontierFilter, limit: u32) -> StoreResult<Vec<Item>> {
        let f = filter.validate()?;
        let now = self.clock.read();
        let mut qb = QueryBuilder::new(ITEM_SELECT);
        push_frontier(&mut qb, ws, &f, now, limit);
        let rows = qb.build().fetch_all(&self.reader).await.map_err(db)?;
        rows.iter().map(|r| item_from_row(r, now)).collect()
    }

    async fn claim_next(
        &self,
        ws: &Workspace,
        filter: &FrontierFilter,
        req: &ClaimRequest,
    ) -> StoreResult<Option<(Item, ClaimOutcome)>> {
        let f = filter.validate()?;
        let ttl = req.validate(&ws.settings)?;
        // One write transaction: the writer lock serializes claim-next callers,
        // so no two can pick the same item and none waits on another's rows.
        let (mut tx, now) = self.begin().await?;
        loop {
            let mut qb = QueryBuilder::new(
                "SELECT i.id, i.prefix, i.number FROM items i LEFT JOIN users a ON a.id = i.assignee_id",
            );
            push_frontier(&mut qb, ws, &f, now, 16);
            let candidates = qb.build().fetch_all(&mut *tx).await.map_err(db)?;
            if candidates.is_empty() {
                tx.commit().await.map_err(db)?;
                return Ok(None);
            }
            for c in &candidates {
                let r = ItemRef { prefix: c.get("prefix"), number: c.get("number") };
                let locked = Self::lock_live_item(&mut tx, ws, &r).await?;
                if let Some(old) = locked.slot.current.as_ref().filter(|l| !l.is_live(now)) {
                    let threshold = ws.settings.quarantine_after_expiries;
                    let quarantined = Self::record_expiry(&mut tx, ws.id, threshold, locked.id, &r, old, now).await?;
                    Self::clear_lease(&mut tx, locked.id).await?;
                    if quarantined && f.without_labels.iter().any(|l| l == NEEDS_HUMAN) {
                        continue;
                    }
                }
                let locked = Self::lock_live_item(&mut tx, ws, &r).await?;
                let out = Self::claim_locked(&mut tx, ws, &r, &locked, req, ttl, now).await?;
                let item = Self::load_item(&mut tx, locked.id, now).await?;
                tx.commit().await.map_err(db)?;
                return Ok(Some((item, out)));
            }
        }
    }

    async fn observe_expiries(&self) -> StoreResult<Vec<ObservedExpiry>> {
        let (mut tx, now) = self.begin().await?;
        let rows = sqlx::query(
            "SELECT i.id, i.workspace_id, w.slug, i.prefix, i.number, i.deleted_at, w.quarantine_after_expiries, i.lease_holder,
                    i.lease_user_id, i.lease_session_id, i.lease_epoch, i.lease_acquired_at, i.lease_renewed_at,
                    i.lease_expires_at, i.lease_ttl_seconds, i.lease_id
             FROM items i JOIN workspaces w ON w.id = i.workspace_id
             WHERE i.lease_holder IS NOT NULL AND i.lease_expires_at <= ? ORDER BY i.lease_expires_at LIMIT 500",
        )
        .bind(micros(now))
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
        let mut observed = Vec::with_capacity(rows.len());
        for row in &rows {
            let slot = rows::lease_slot(row)?;
            let old = slot.current.as_ref().expect("selected rows hold a lease");
            let r = ItemRef { prefix: row.get("prefix"), number: row.get("number") };
            let threshold = u32::try_from(row.get::<i64, _>("quarantine_after_expiries")).unwrap_or(0);
            let id: i64 = row.get("id");
            let quarantined =
                Self::record_expiry(&mut tx, row.get("workspace_id"), threshold, id, &r, old, now).await?;
            Self::clear_lease(&mut tx, id).await?;
            observed.push(ObservedExpiry {
                workspace: row.get("slug"),
                held: old.expires_at - old.acquired_at,
                quarantined,
            });
        }
        tx.commit().await.map_err(db)?;
        Ok(observed)
    }

    async fn live_leases(&self) -> StoreResult<Vec<(String, u64)>> {
        let rows = sqlx::query(
            "SELECT w.slug, COUNT(*) AS n FROM items i JOIN workspaces w ON w.id = i.workspace_id
             WHERE i.lease_holder IS NOT NULL AND i.lease_expires_at > ? GROUP BY w.slug ORDER BY w.slug",
        )
        .bind(micros(self.clock.read()))
        .fetch_all(&self.reader)
        .await
        .map_err(db)?;
        Ok(rows.iter().map(|r| (r.get("slug"), u64::try_from(r.get::<i64, _>("n")).unwrap_or(0))).collect())
    }

    async fn events_where(
        &self,
        ws: &Workspace,
        after: i64,
        limit: u32,
        filter: &EventFilter,
    ) -> StoreResult<Vec<Event>> {
        let mut qb: QueryBuilder<Sqlite> = QueryBuilder::new(
            "SELECT e.id, e.type, e.item_ref, u.email, e.at, e.data FROM events e LEFT JOIN users u ON u.id = e.actor_id
             WHERE e.workspace_id = ",
        );
        qb.push_bind(ws.id).push(" AND e.id > ").push_bind(after);
        if let Some(r) = &filter.item_ref {
            qb.push(" AND e.item_ref = ").push_bind(r.to_string());
        }
        push_in(&mut qb, "e.type", filter.kinds.iter().map(|k| k.as_str().to_string()));
        qb.push(" ORDER BY e.id LIMIT ").push_bind(i64::from(limit.clamp(1, 1000)));
        let rows = qb.build().fetch_all(&self.reader).await.map_err(db)?;
        rows.iter()
            .map(|row| {
                Ok(Event {
                    id: row.get("id"),
                    kind: row.get("type"),
                    item_ref: row.get("item_ref"),
                    actor: row.get("email"),
                    at: ts(row.get("at"))?,
                    data: serde_json::from_str(row.get("data")).map_err(|e| StoreError::Internal(e.to_string()))?,
                })
            })
            .collect()
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

impl SqliteStore {
    /// The grant-or-refresh half of a claim, on an item already locked by
    /// this write transaction. Shared by claim and claim-next.
    async fn claim_locked(
        conn: &mut SqliteConnection,
        ws: &Workspace,
        r: &ItemRef,
        locked: &Locked,
        req: &ClaimRequest,
        ttl: pad_core::lease::Ttl,
        now: Timestamp,
    ) -> StoreResult<ClaimOutcome> {
        let claimant =
            Claimant { user_id: req.actor.user_id, holder: &req.holder, session_id: req.session_id.as_deref() };
        let next_id: i64 = sqlx::query_scalar("SELECT next_lease_id FROM workspaces WHERE id = ?")
            .bind(ws.id)
            .fetch_one(&mut *conn)
            .await
            .map_err(db)?;
        match lease::decide_claim(&locked.slot, &claimant, ttl, req.refresh, next_id, now) {
            ClaimDecision::Held(l) => Err(StoreError::held(l, now)),
            ClaimDecision::Refresh(l) => {
                Self::write_lease(conn, locked.id, &l, req.note.as_deref()).await?;
                Ok(ClaimOutcome { lease: l, refreshed: true, previous_note: None, previous_holder: None })
            }
            ClaimDecision::Grant { lease: l, .. } => {
                sqlx::query("UPDATE workspaces SET next_lease_id = next_lease_id + 1 WHERE id = ?")
                    .bind(ws.id)
                    .execute(&mut *conn)
                    .await
                    .map_err(db)?;
                let prev = sqlx::query("SELECT lease_note, lease_note_holder FROM items WHERE id = ?")
                    .bind(locked.id)
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(db)?;
                Self::write_lease(conn, locked.id, &l, req.note.as_deref()).await?;
                let data = shared::event::claimed(&l);
                Self::event(conn, ws.id, EventKind::LeaseClaimed, r, Some(req.actor), now, data).await?;
                Ok(ClaimOutcome {
                    lease: l,
                    refreshed: false,
                    previous_note: prev.get("lease_note"),
                    previous_holder: prev.get("lease_note_holder"),
                })
            }
        }
    }

    /// L5/L13: the first observation of an expired lease. Writes
    /// `lease.expired`, counts it, and quarantines the item (`needs-human`)
    /// when the count reaches the workspace's threshold. Returns whether it
    /// quarantined. Callers have checked that `old` is recorded and expired.
    async fn record_expiry(
        conn: &mut SqliteConnection,
        ws: i64,
        threshold: u32,
        id: i64,
        r: &ItemRef,
        old: &Lease,
        now: Timestamp,
    ) -> StoreResult<bool> {
        // L18: the expired lease becomes the last lease, ended at its expiry.
        let row = sqlx::query(
            "UPDATE items SET lease_expiries = lease_expiries + 1,
                    last_lease_id = lease_id, last_lease_epoch = lease_epoch, last_lease_holder = lease_holder,
                    last_lease_session_id = lease_session_id, last_lease_acquired_at = lease_acquired_at,
                    last_lease_ended_at = lease_expires_at, last_lease_ended = 'expired',
                    last_lease_note = CASE WHEN lease_note_lease_id = lease_id THEN lease_note END
             WHERE id = ? RETURNING lease_expiries, labels",
        )
        .bind(id)
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
        let data = shared::event::expired(&old.holder, old.epoch, old.expires_at);
        Self::event(conn, ws, EventKind::LeaseExpired, r, None, now, data).await?;
        let expiries: i64 = row.get("lease_expiries");
        let mut labels: Vec<String> =
            serde_json::from_str(row.get("labels")).map_err(|e| StoreError::Internal(e.to_string()))?;
        if !pad_core::lease::should_quarantine(expiries, threshold, &labels) {
            return Ok(false);
        }
        labels.push(NEEDS_HUMAN.to_string());
        sqlx::query("UPDATE items SET labels = ? WHERE id = ?")
            .bind(serde_json::to_string(&labels).expect("labels serialize"))
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
        Self::event(conn, ws, EventKind::ItemQuarantined, r, None, now, shared::event::quarantined(expiries)).await?;
        Ok(true)
    }

    /// L18: ends the recorded lease `how`, at `at`: it becomes the item's
    /// last lease (with the note written under it), and is forgotten.
    async fn end_lease(conn: &mut SqliteConnection, id: i64, how: LeaseEnd, at: Timestamp) -> StoreResult<()> {
        sqlx::query(
            "UPDATE items SET last_lease_id = lease_id, last_lease_epoch = lease_epoch, last_lease_holder = lease_holder,
                    last_lease_session_id = lease_session_id, last_lease_acquired_at = lease_acquired_at,
                    last_lease_ended_at = ?, last_lease_ended = ?,
                    last_lease_note = CASE WHEN lease_note_lease_id = lease_id THEN lease_note END
             WHERE id = ?",
        )
        .bind(micros(at))
        .bind(how.as_str())
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
        Self::clear_lease(conn, id).await
    }

    /// Forgets an ended lease; the epoch counter and the last note stay.
    async fn clear_lease(conn: &mut SqliteConnection, id: i64) -> StoreResult<()> {
        sqlx::query(
            "UPDATE items SET lease_holder = NULL, lease_user_id = NULL, lease_session_id = NULL, lease_acquired_at = NULL,
                    lease_renewed_at = NULL, lease_expires_at = NULL, lease_ttl_seconds = NULL WHERE id = ?",
        )
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn find_id(&self, ws: &Workspace, r: &ItemRef) -> StoreResult<i64> {
        sqlx::query_scalar("SELECT id FROM items WHERE workspace_id = ? AND prefix = ? AND number = ?")
            .bind(ws.id)
            .bind(&r.prefix)
            .bind(r.number)
            .fetch_optional(&self.reader)
            .await
            .map_err(db)?
            .ok_or_else(|| StoreError::not_found(format!("item {r}")))
    }

    async fn set_deleted(
        &self,
        ws: &Workspace,
        actor: Actor,
        item_ref: &str,
        fence: LeaseHandle,
        deleted: bool,
    ) -> StoreResult<Item> {
        let r = parse_ref("ref", item_ref)?;
        let (mut tx, now) = self.begin().await?;
        let locked = Self::lock_item(&mut tx, ws, &r).await?;
        lease::check_fence(&locked.slot, fence, now).map_err(|live| StoreError::lost(live, now))?;
        let old = Self::load_item(&mut tx, locked.id, now).await?;
        if locked.deleted == deleted {
            return Ok(old);
        }
        let at = deleted.then(|| micros(now));
        sqlx::query("UPDATE items SET deleted_at = ?, updated_at = ?, version = version + 1 WHERE id = ?")
            .bind(at)
            .bind(micros(now))
            .bind(locked.id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let new = Self::load_item(&mut tx, locked.id, now).await?;
        Self::add_version(&mut tx, locked.id, actor, new.changes_since(Some(&old)), now).await?;
        let kind = if deleted { EventKind::ItemDeleted } else { EventKind::ItemRestored };
        Self::event(&mut tx, ws.id, kind, &r, Some(actor), now, serde_json::json!({})).await?;
        tx.commit().await.map_err(db)?;
        Ok(new)
    }
}

/// ` AND column IN (…)` for a non-empty list; nothing for an empty one.
fn push_in<T>(qb: &mut QueryBuilder<Sqlite>, column: &str, values: impl Iterator<Item = T>)
where
    T: for<'q> sqlx::Encode<'q, Sqlite> + sqlx::Type<Sqlite> + Send + 'static,
{
    let mut values = values.peekable();
    if values.peek().is_none() {
        return;
    }
    qb.push(format!(" AND {column} IN ("));
    let mut sep = qb.separated(", ");
    for v in values {
        sep.push_bind(v);
    }
    qb.push(")");
}

/// The frontier predicate and order (L11), appended to a SELECT over `items i`
/// (joined with `users a`).
fn push_frontier(qb: &mut QueryBuilder<Sqlite>, ws: &Workspace, f: &ValidFrontierFilter, now: Timestamp, limit: u32) {
    qb.push(" WHERE i.workspace_id = ").push_bind(ws.id);
    qb.push(" AND i.deleted_at IS NULL AND i.status = 'open'");
    qb.push(" AND (i.lease_holder IS NULL OR i.lease_expires_at <= ").push_bind(micros(now)).push(")");
    // L14, L16: deferred and backing-off items wait.
    qb.push(" AND (i.not_before IS NULL OR i.not_before <= ").push_bind(micros(now)).push(")");
    qb.push(" AND (i.retry_at IS NULL OR i.retry_at <= ").push_bind(micros(now)).push(")");
    for r in &f.exclude {
        qb.push(" AND NOT (i.prefix = ")
            .push_bind(r.prefix.clone())
            .push(" AND i.number = ")
            .push_bind(r.number)
            .push(")");
    }
    qb.push(
        " AND NOT EXISTS (SELECT 1 FROM item_blockers ib JOIN items b ON b.id = ib.blocker_id
           WHERE ib.item_id = i.id AND b.deleted_at IS NULL AND b.status NOT IN ('done', 'cancelled'))",
    );
    push_in(qb, "i.kind", f.kinds.iter().cloned());
    for l in &f.labels {
        qb.push(" AND EXISTS (SELECT 1 FROM json_each(i.labels) WHERE value = ").push_bind(l.clone()).push(")");
    }
    for l in &f.without_labels {
        qb.push(" AND NOT EXISTS (SELECT 1 FROM json_each(i.labels) WHERE value = ").push_bind(l.clone()).push(")");
    }
    if let Some(p) = f.min_priority {
        qb.push(" AND i.priority >= ").push_bind(p.rank());
    }
    if let Some(p) = &f.parent {
        push_parent(qb, ws, p);
    }
    qb.push(" ORDER BY i.priority DESC, i.created_at, i.id LIMIT ")
        .push_bind(i64::from(limit.clamp(1, LIST_LIMIT_MAX)));
}

/// ` AND` the item is a child of `p`.
fn push_parent(qb: &mut QueryBuilder<Sqlite>, ws: &Workspace, p: &ItemRef) {
    qb.push(" AND i.parent_id = (SELECT id FROM items WHERE workspace_id = ")
        .push_bind(ws.id)
        .push(" AND prefix = ")
        .push_bind(p.prefix.clone())
        .push(" AND number = ")
        .push_bind(p.number)
        .push(")");
}
