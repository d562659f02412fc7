//! Users, workspaces, members, tokens, web sessions and kinds.

use pad_core::model::{DEFAULT_KINDS, validate_kind_name, validate_prefix, validate_slug};
use pad_core::validate::{self, Lines};
use pad_core::{Kind, Member, Principal, Role, TokenInfo, User, Workspace};
use pad_store::steps::{Begin, WriteTx};
use pad_store::{Actor, StoreError, StoreResult, shared};
use sqlx::Row;

use crate::rows::{self, micros, ts};
use crate::{SqliteStore, db};

/// One token insert, under the per-user cap (docs/api.md, "Tokens").
pub(crate) async fn insert_token(
    s: &SqliteStore,
    user: Actor,
    name: &str,
    hash: &str,
    scope: Option<(i64, Role)>,
) -> StoreResult<TokenInfo> {
    validate::text("name", name, 1, 200, Lines::Single)?;
    let mut tx = s.begin().await?;
    let now = tx.now;
    let live: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tokens WHERE user_id = ? AND revoked_at IS NULL")
        .bind(user.user_id)
        .fetch_one(&mut *tx.conn)
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
    .fetch_one(&mut *tx.conn)
    .await
    .map_err(db)?;
    let sql = format!("{} WHERE t.id = ?", rows::TOKEN_SELECT);
    let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&mut *tx.conn).await.map_err(db)?;
    tx.commit().await?;
    rows::token_from_row(&row)
}

pub(crate) async fn has_users(s: &SqliteStore) -> StoreResult<bool> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users").fetch_one(&s.reader).await.map_err(db)?;
    Ok(n > 0)
}

pub(crate) async fn ensure_user(s: &SqliteStore, email: &str) -> StoreResult<User> {
    validate::email("email", email)?;
    let mut tx = s.begin().await?;
    let now = tx.now;
    let user = rows::ensure_user(&mut tx.conn, email, now).await?;
    tx.commit().await?;
    Ok(user)
}

pub(crate) async fn create_workspace(s: &SqliteStore, slug: &str, name: &str, owner: Actor) -> StoreResult<Workspace> {
    validate_slug("slug", slug)?;
    validate::text("name", name, 1, 200, Lines::Single)?;
    let mut tx = s.begin().await?;
    let now = tx.now;
    let taken: Option<i64> = sqlx::query_scalar("SELECT id FROM workspaces WHERE slug = ?")
        .bind(slug)
        .fetch_optional(&mut *tx.conn)
        .await
        .map_err(db)?;
    if taken.is_some() {
        return Err(StoreError::invalid("slug", format!("workspace {slug:?} already exists")));
    }
    let id: i64 = sqlx::query_scalar("INSERT INTO workspaces (slug, name, created_at) VALUES (?, ?, ?) RETURNING id")
        .bind(slug)
        .bind(name)
        .bind(micros(now))
        .fetch_one(&mut *tx.conn)
        .await
        .map_err(db)?;
    sqlx::query("INSERT INTO members (workspace_id, user_id, role, added_at) VALUES (?, ?, 'owner', ?)")
        .bind(id)
        .bind(owner.user_id)
        .bind(micros(now))
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    for (kind, prefix) in DEFAULT_KINDS {
        sqlx::query("INSERT INTO kinds (workspace_id, name, prefix) VALUES (?, ?, ?)")
            .bind(id)
            .bind(kind)
            .bind(prefix)
            .execute(&mut *tx.conn)
            .await
            .map_err(db)?;
    }
    let row =
        sqlx::query("SELECT * FROM workspaces WHERE id = ?").bind(id).fetch_one(&mut *tx.conn).await.map_err(db)?;
    let ws = rows::workspace_from_row(&row)?;
    tx.commit().await?;
    Ok(ws)
}

pub(crate) async fn list_workspaces(s: &SqliteStore, user: Actor) -> StoreResult<Vec<(Workspace, Role)>> {
    let rows = sqlx::query("SELECT w.*, m.role FROM workspaces w JOIN members m ON m.workspace_id = w.id WHERE m.user_id = ? ORDER BY w.slug")
        .bind(user.user_id)
        .fetch_all(&s.reader)
        .await
        .map_err(db)?;
    rows.iter().map(|r| Ok((rows::workspace_from_row(r)?, rows::role(r)?))).collect()
}

pub(crate) async fn membership(s: &SqliteStore, user: Actor, slug: &str) -> StoreResult<(Workspace, Role)> {
    validate_slug("workspace", slug)?;
    let row = sqlx::query("SELECT w.*, m.role FROM workspaces w JOIN members m ON m.workspace_id = w.id WHERE m.user_id = ? AND w.slug = ?")
        .bind(user.user_id)
        .bind(slug)
        .fetch_optional(&s.reader)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::not_found(format!("workspace {slug}")))?;
    Ok((rows::workspace_from_row(&row)?, rows::role(&row)?))
}

pub(crate) async fn set_member(s: &SqliteStore, ws: &Workspace, email: &str, role: Role) -> StoreResult<Member> {
    validate::email("email", email)?;
    let mut tx = s.begin().await?;
    let now = tx.now;
    let user = rows::ensure_user(&mut tx.conn, email, now).await?;
    let current: Option<String> = sqlx::query_scalar("SELECT role FROM members WHERE workspace_id = ? AND user_id = ?")
        .bind(ws.id)
        .bind(user.id)
        .fetch_optional(&mut *tx.conn)
        .await
        .map_err(db)?;
    if current.as_deref() == Some("owner") && role != Role::Owner {
        let owners: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM members WHERE workspace_id = ? AND role = 'owner'")
            .bind(ws.id)
            .fetch_one(&mut *tx.conn)
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
    .execute(&mut *tx.conn)
    .await
    .map_err(db)?;
    let added: i64 = sqlx::query_scalar("SELECT added_at FROM members WHERE workspace_id = ? AND user_id = ?")
        .bind(ws.id)
        .bind(user.id)
        .fetch_one(&mut *tx.conn)
        .await
        .map_err(db)?;
    tx.commit().await?;
    Ok(Member { email: user.email, role, added_at: ts(added)? })
}

pub(crate) async fn list_members(s: &SqliteStore, ws: &Workspace) -> StoreResult<Vec<Member>> {
    let rows = sqlx::query("SELECT u.email, m.role, m.added_at FROM members m JOIN users u ON u.id = m.user_id WHERE m.workspace_id = ? ORDER BY m.added_at, u.id")
        .bind(ws.id)
        .fetch_all(&s.reader)
        .await
        .map_err(db)?;
    rows.iter()
        .map(|r| Ok(Member { email: r.get("email"), role: rows::role(r)?, added_at: ts(r.get("added_at"))? }))
        .collect()
}

pub(crate) async fn remove_member(s: &SqliteStore, ws: &Workspace, email: &str) -> StoreResult<()> {
    validate::email("email", email)?;
    let mut tx = s.begin().await?;
    let now = tx.now;
    let row = sqlx::query(
        "SELECT m.user_id, m.role FROM members m JOIN users u ON u.id = m.user_id WHERE m.workspace_id = ? AND u.email = ?",
    )
    .bind(ws.id)
    .bind(email.to_lowercase())
    .fetch_optional(&mut *tx.conn)
    .await
    .map_err(db)?
    .ok_or_else(|| StoreError::not_found(format!("member {email}")))?;
    let user: i64 = row.get("user_id");
    if rows::role(&row)? == Role::Owner {
        let owners: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM members WHERE workspace_id = ? AND role = 'owner'")
            .bind(ws.id)
            .fetch_one(&mut *tx.conn)
            .await
            .map_err(db)?;
        if owners <= 1 {
            return Err(StoreError::invalid("email", "a workspace needs at least one owner"));
        }
    }
    sqlx::query("DELETE FROM members WHERE workspace_id = ? AND user_id = ?")
        .bind(ws.id)
        .bind(user)
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    sqlx::query("UPDATE tokens SET revoked_at = ? WHERE user_id = ? AND workspace_id = ? AND revoked_at IS NULL")
        .bind(micros(now))
        .bind(user)
        .bind(ws.id)
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    tx.commit().await?;
    Ok(())
}

pub(crate) async fn list_tokens(s: &SqliteStore, ws: &Workspace, user: Actor) -> StoreResult<Vec<TokenInfo>> {
    let sql = format!(
        "{} WHERE t.revoked_at IS NULL AND (t.workspace_id = ? OR t.user_id = ?) ORDER BY t.id",
        rows::TOKEN_SELECT
    );
    let rows =
        sqlx::query(sqlx::AssertSqlSafe(sql)).bind(ws.id).bind(user.user_id).fetch_all(&s.reader).await.map_err(db)?;
    rows.iter().map(rows::token_from_row).collect()
}

pub(crate) async fn get_token(s: &SqliteStore, id: i64) -> StoreResult<TokenInfo> {
    let sql = format!("{} WHERE t.revoked_at IS NULL AND t.id = ?", rows::TOKEN_SELECT);
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(&s.reader)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::not_found(format!("token {id}")))?;
    rows::token_from_row(&row)
}

pub(crate) async fn revoke_token(s: &SqliteStore, id: i64) -> StoreResult<()> {
    let mut tx = s.begin().await?;
    let now = tx.now;
    sqlx::query("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
        .bind(micros(now))
        .bind(id)
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    tx.commit().await?;
    Ok(())
}

pub(crate) async fn authenticate(s: &SqliteStore, hash: &str) -> StoreResult<Option<Principal>> {
    let row = sqlx::query(
        "SELECT t.id AS token_id, t.last_used_at, t.workspace_id, t.role AS scope_role, u.id AS user_id, u.email
         FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = ? AND t.revoked_at IS NULL",
    )
    .bind(hash)
    .fetch_optional(&s.reader)
    .await
    .map_err(db)?;
    let Some(row) = row else { return Ok(None) };
    // Record use at most once a minute, so authentication stays off the write path.
    let now = s.clock.read();
    let last: Option<i64> = row.get("last_used_at");
    if last.is_none_or(|l| micros(now) - l > 60_000_000) {
        let mut tx = s.begin().await?;
        let now = tx.now;
        sqlx::query("UPDATE tokens SET last_used_at = ? WHERE id = ?")
            .bind(micros(now))
            .bind(row.get::<i64, _>("token_id"))
            .execute(&mut *tx.conn)
            .await
            .map_err(db)?;
        tx.commit().await?;
    }
    Ok(Some(rows::principal_from_row(&row)?))
}

pub(crate) async fn user_by_email(s: &SqliteStore, email: &str) -> StoreResult<Option<User>> {
    validate::email("email", email)?;
    let email = email.to_lowercase();
    let id: Option<i64> = sqlx::query_scalar("SELECT id FROM users WHERE email = ?")
        .bind(&email)
        .fetch_optional(&s.reader)
        .await
        .map_err(db)?;
    Ok(id.map(|id| User { id, email }))
}

pub(crate) async fn bootstrap(s: &SqliteStore, email: &str, slug: &str, name: &str, hash: &str) -> StoreResult<bool> {
    validate::email("email", email)?;
    validate_slug("slug", slug)?;
    // BEGIN IMMEDIATE: no other writer runs between the check and the inserts.
    let mut tx = s.begin().await?;
    let now = tx.now;
    let users: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users").fetch_one(&mut *tx.conn).await.map_err(db)?;
    if users > 0 {
        return Ok(false);
    }
    let user = rows::ensure_user(&mut tx.conn, email, now).await?;
    shared::failpoint("bootstrap-user");
    let ws: i64 = sqlx::query_scalar("INSERT INTO workspaces (slug, name, created_at) VALUES (?, ?, ?) RETURNING id")
        .bind(slug)
        .bind(name)
        .bind(micros(now))
        .fetch_one(&mut *tx.conn)
        .await
        .map_err(db)?;
    sqlx::query("INSERT INTO members (workspace_id, user_id, role, added_at) VALUES (?, ?, 'owner', ?)")
        .bind(ws)
        .bind(user.id)
        .bind(micros(now))
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    for (kind, prefix) in DEFAULT_KINDS {
        sqlx::query("INSERT INTO kinds (workspace_id, name, prefix) VALUES (?, ?, ?)")
            .bind(ws)
            .bind(kind)
            .bind(prefix)
            .execute(&mut *tx.conn)
            .await
            .map_err(db)?;
    }
    shared::failpoint("bootstrap-workspace");
    sqlx::query("INSERT INTO tokens (user_id, name, hash, created_at) VALUES (?, 'bootstrap', ?, ?)")
        .bind(user.id)
        .bind(hash)
        .bind(micros(now))
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    shared::failpoint("bootstrap-token");
    tx.commit().await?;
    Ok(true)
}

pub(crate) async fn create_session(s: &SqliteStore, token_id: i64, hash: &str, ttl_seconds: i64) -> StoreResult<()> {
    let mut tx = s.begin().await?;
    let now = tx.now;
    sqlx::query("INSERT INTO sessions (hash, token_id, created_at, expires_at) VALUES (?, ?, ?, ?)")
        .bind(hash)
        .bind(token_id)
        .bind(micros(now))
        .bind(micros(now) + ttl_seconds * 1_000_000)
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    tx.commit().await?;
    Ok(())
}

pub(crate) async fn authenticate_session(s: &SqliteStore, hash: &str) -> StoreResult<Option<Principal>> {
    let row = sqlx::query(
        "SELECT t.id AS token_id, t.workspace_id, t.role AS scope_role, u.id AS user_id, u.email
         FROM sessions s JOIN tokens t ON t.id = s.token_id JOIN users u ON u.id = t.user_id
         WHERE s.hash = ? AND s.revoked_at IS NULL AND s.expires_at > ? AND t.revoked_at IS NULL",
    )
    .bind(hash)
    .bind(micros(s.clock.read()))
    .fetch_optional(&s.reader)
    .await
    .map_err(db)?;
    row.as_ref().map(rows::principal_from_row).transpose()
}

pub(crate) async fn revoke_session(s: &SqliteStore, hash: &str) -> StoreResult<()> {
    let mut tx = s.begin().await?;
    let now = tx.now;
    sqlx::query("UPDATE sessions SET revoked_at = ? WHERE hash = ? AND revoked_at IS NULL")
        .bind(micros(now))
        .bind(hash)
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    tx.commit().await?;
    Ok(())
}

pub(crate) async fn list_kinds(s: &SqliteStore, ws: &Workspace) -> StoreResult<Vec<Kind>> {
    let rows = sqlx::query("SELECT name, prefix FROM kinds WHERE workspace_id = ? ORDER BY rowid")
        .bind(ws.id)
        .fetch_all(&s.reader)
        .await
        .map_err(db)?;
    Ok(rows.iter().map(|r| Kind { name: r.get("name"), prefix: r.get("prefix") }).collect())
}

pub(crate) async fn add_kind(s: &SqliteStore, ws: &Workspace, name: &str, prefix: &str) -> StoreResult<Kind> {
    validate_kind_name("name", name)?;
    validate_prefix("prefix", prefix)?;
    let mut tx = s.begin().await?;
    let clash: Option<String> =
        sqlx::query_scalar("SELECT name FROM kinds WHERE workspace_id = ? AND (name = ? OR prefix = ?)")
            .bind(ws.id)
            .bind(name)
            .bind(prefix)
            .fetch_optional(&mut *tx.conn)
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
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    tx.commit().await?;
    Ok(Kind { name: name.into(), prefix: prefix.into() })
}
