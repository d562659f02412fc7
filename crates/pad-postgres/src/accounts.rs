//! Users, workspaces, members, tokens, web sessions and kinds.

use pad_core::model::{DEFAULT_KINDS, validate_kind_name, validate_prefix, validate_slug};
use pad_core::validate::{self, Lines};
use pad_core::{Kind, Member, Principal, Role, Timestamp, TokenInfo, User, Workspace};
use pad_store::steps::{Begin, WriteTx};
use pad_store::{Actor, StoreError, StoreResult, shared};
use sqlx::Row;

use crate::rows;
use crate::{PgStore, db};

/// One token insert, under the per-user cap (docs/api.md, "Tokens"). The
/// user's row lock serializes concurrent mints of one user, so the cap
/// holds across instances.
pub(crate) async fn insert_token(
    s: &PgStore,
    user: Actor,
    name: &str,
    hash: &str,
    scope: Option<(i64, Role)>,
) -> StoreResult<TokenInfo> {
    validate::text("name", name, 1, 200, Lines::Single)?;
    let mut tx = s.begin().await?;
    sqlx::query("SELECT id FROM users WHERE id = $1 FOR UPDATE")
        .bind(user.user_id)
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    let live: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tokens WHERE user_id = $1 AND revoked_at IS NULL")
        .bind(user.user_id)
        .fetch_one(&mut *tx.conn)
        .await
        .map_err(db)?;
    shared::too_many_tokens(live)?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO tokens (user_id, name, hash, created_at, workspace_id, role)
         VALUES ($1, $2, $3, now(), $4, $5) RETURNING id",
    )
    .bind(user.user_id)
    .bind(name)
    .bind(hash)
    .bind(scope.map(|s| s.0))
    .bind(scope.map(|s| s.1.as_str()))
    .fetch_one(&mut *tx.conn)
    .await
    .map_err(db)?;
    let sql = format!("{} WHERE t.id = $1", rows::TOKEN_SELECT);
    let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&mut *tx.conn).await.map_err(db)?;
    tx.commit().await?;
    rows::token_from_row(&row)
}

pub(crate) async fn has_users(s: &PgStore) -> StoreResult<bool> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM users)").fetch_one(&s.pool).await.map_err(db)
}

pub(crate) async fn ensure_user(s: &PgStore, email: &str) -> StoreResult<User> {
    validate::email("email", email)?;
    let mut conn = s.pool.acquire().await.map_err(db)?;
    rows::ensure_user(&mut conn, email).await
}

pub(crate) async fn create_workspace(s: &PgStore, slug: &str, name: &str, owner: Actor) -> StoreResult<Workspace> {
    validate_slug("slug", slug)?;
    validate::text("name", name, 1, 200, Lines::Single)?;
    let mut tx = s.begin().await?;
    // `DO NOTHING` waits for a concurrent insert of the same slug and then
    // skips: two instances bootstrapping at once get one workspace, and the
    // loser a validation error it can recognize.
    let row = sqlx::query(
        "INSERT INTO workspaces (slug, name, created_at) VALUES ($1, $2, now())
         ON CONFLICT (slug) DO NOTHING RETURNING *",
    )
    .bind(slug)
    .bind(name)
    .fetch_optional(&mut *tx.conn)
    .await
    .map_err(db)?
    .ok_or_else(|| StoreError::invalid("slug", format!("workspace {slug:?} already exists")))?;
    let ws = rows::workspace_from_row(&row)?;
    sqlx::query("INSERT INTO members (workspace_id, user_id, role, added_at) VALUES ($1, $2, 'owner', now())")
        .bind(ws.id)
        .bind(owner.user_id)
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    for (kind, prefix) in DEFAULT_KINDS {
        sqlx::query("INSERT INTO kinds (workspace_id, name, prefix) VALUES ($1, $2, $3)")
            .bind(ws.id)
            .bind(kind)
            .bind(prefix)
            .execute(&mut *tx.conn)
            .await
            .map_err(db)?;
    }
    tx.commit().await?;
    Ok(ws)
}

pub(crate) async fn list_workspaces(s: &PgStore, user: Actor) -> StoreResult<Vec<(Workspace, Role)>> {
    let rows = sqlx::query("SELECT w.*, m.role FROM workspaces w JOIN members m ON m.workspace_id = w.id WHERE m.user_id = $1 ORDER BY w.slug")
        .bind(user.user_id)
        .fetch_all(&s.pool)
        .await
        .map_err(db)?;
    rows.iter().map(|r| Ok((rows::workspace_from_row(r)?, rows::role(r)?))).collect()
}

pub(crate) async fn membership(s: &PgStore, user: Actor, slug: &str) -> StoreResult<(Workspace, Role)> {
    validate_slug("workspace", slug)?;
    let row = sqlx::query("SELECT w.*, m.role FROM workspaces w JOIN members m ON m.workspace_id = w.id WHERE m.user_id = $1 AND w.slug = $2")
        .bind(user.user_id)
        .bind(slug)
        .fetch_optional(&s.pool)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::not_found(format!("workspace {slug}")))?;
    Ok((rows::workspace_from_row(&row)?, rows::role(&row)?))
}

pub(crate) async fn set_member(s: &PgStore, ws: &Workspace, email: &str, role: Role) -> StoreResult<Member> {
    validate::email("email", email)?;
    let mut tx = s.begin().await?;
    // Serializes membership changes per workspace, so two concurrent
    // demotions cannot both see "another owner remains".
    sqlx::query("SELECT id FROM workspaces WHERE id = $1 FOR UPDATE")
        .bind(ws.id)
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    let user = rows::ensure_user(&mut tx.conn, email).await?;
    let current: Option<String> =
        sqlx::query_scalar("SELECT role FROM members WHERE workspace_id = $1 AND user_id = $2")
            .bind(ws.id)
            .bind(user.id)
            .fetch_optional(&mut *tx.conn)
            .await
            .map_err(db)?;
    if current.as_deref() == Some("owner") && role != Role::Owner {
        let owners: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM members WHERE workspace_id = $1 AND role = 'owner'")
            .bind(ws.id)
            .fetch_one(&mut *tx.conn)
            .await
            .map_err(db)?;
        if owners <= 1 {
            return Err(StoreError::invalid("role", "a workspace needs at least one owner"));
        }
    }
    let added: Timestamp = sqlx::query_scalar(
        "INSERT INTO members (workspace_id, user_id, role, added_at) VALUES ($1, $2, $3, now())
         ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = excluded.role RETURNING added_at",
    )
    .bind(ws.id)
    .bind(user.id)
    .bind(role.as_str())
    .fetch_one(&mut *tx.conn)
    .await
    .map_err(db)?;
    tx.commit().await?;
    Ok(Member { email: user.email, role, added_at: added })
}

pub(crate) async fn list_members(s: &PgStore, ws: &Workspace) -> StoreResult<Vec<Member>> {
    let rows = sqlx::query("SELECT u.email, m.role, m.added_at FROM members m JOIN users u ON u.id = m.user_id WHERE m.workspace_id = $1 ORDER BY m.added_at, u.id")
        .bind(ws.id)
        .fetch_all(&s.pool)
        .await
        .map_err(db)?;
    rows.iter()
        .map(|r| Ok(Member { email: r.get("email"), role: rows::role(r)?, added_at: r.get("added_at") }))
        .collect()
}

pub(crate) async fn remove_member(s: &PgStore, ws: &Workspace, email: &str) -> StoreResult<()> {
    validate::email("email", email)?;
    let mut tx = s.begin().await?;
    // Serializes membership changes per workspace, as set_member does.
    sqlx::query("SELECT id FROM workspaces WHERE id = $1 FOR UPDATE")
        .bind(ws.id)
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    let row = sqlx::query(
        "SELECT m.user_id, m.role FROM members m JOIN users u ON u.id = m.user_id WHERE m.workspace_id = $1 AND u.email = $2",
    )
    .bind(ws.id)
    .bind(email.to_lowercase())
    .fetch_optional(&mut *tx.conn)
    .await
    .map_err(db)?
    .ok_or_else(|| StoreError::not_found(format!("member {email}")))?;
    let user: i64 = row.get("user_id");
    if rows::role(&row)? == Role::Owner {
        let owners: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM members WHERE workspace_id = $1 AND role = 'owner'")
            .bind(ws.id)
            .fetch_one(&mut *tx.conn)
            .await
            .map_err(db)?;
        if owners <= 1 {
            return Err(StoreError::invalid("email", "a workspace needs at least one owner"));
        }
    }
    sqlx::query("DELETE FROM members WHERE workspace_id = $1 AND user_id = $2")
        .bind(ws.id)
        .bind(user)
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    sqlx::query("UPDATE tokens SET revoked_at = now() WHERE user_id = $1 AND workspace_id = $2 AND revoked_at IS NULL")
        .bind(user)
        .bind(ws.id)
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    tx.commit().await?;
    Ok(())
}

pub(crate) async fn list_tokens(s: &PgStore, ws: &Workspace, user: Actor) -> StoreResult<Vec<TokenInfo>> {
    let sql = format!(
        "{} WHERE t.revoked_at IS NULL AND (t.workspace_id = $1 OR t.user_id = $2) ORDER BY t.id",
        rows::TOKEN_SELECT
    );
    let rows =
        sqlx::query(sqlx::AssertSqlSafe(sql)).bind(ws.id).bind(user.user_id).fetch_all(&s.pool).await.map_err(db)?;
    rows.iter().map(rows::token_from_row).collect()
}

pub(crate) async fn get_token(s: &PgStore, id: i64) -> StoreResult<TokenInfo> {
    let sql = format!("{} WHERE t.revoked_at IS NULL AND t.id = $1", rows::TOKEN_SELECT);
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(&s.pool)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::not_found(format!("token {id}")))?;
    rows::token_from_row(&row)
}

pub(crate) async fn revoke_token(s: &PgStore, id: i64) -> StoreResult<()> {
    sqlx::query("UPDATE tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL")
        .bind(id)
        .execute(&s.pool)
        .await
        .map_err(db)?;
    Ok(())
}

pub(crate) async fn authenticate(s: &PgStore, hash: &str) -> StoreResult<Option<Principal>> {
    let row = sqlx::query(
        "SELECT t.id AS token_id, t.workspace_id, t.role AS scope_role, u.id AS user_id, u.email,
                (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute') AS stale
         FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = $1 AND t.revoked_at IS NULL",
    )
    .bind(hash)
    .fetch_optional(&s.pool)
    .await
    .map_err(db)?;
    let Some(row) = row else { return Ok(None) };
    // Record use at most once a minute, so authentication stays off the
    // write path; the repeated condition makes concurrent first uses
    // (one token, many instances) write once.
    if row.get::<bool, _>("stale") {
        sqlx::query(
            "UPDATE tokens SET last_used_at = now()
             WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')",
        )
        .bind(row.get::<i64, _>("token_id"))
        .execute(&s.pool)
        .await
        .map_err(db)?;
    }
    Ok(Some(rows::principal_from_row(&row)?))
}

pub(crate) async fn user_by_email(s: &PgStore, email: &str) -> StoreResult<Option<User>> {
    validate::email("email", email)?;
    let email = email.to_lowercase();
    let id: Option<i64> = sqlx::query_scalar("SELECT id FROM users WHERE email = $1")
        .bind(&email)
        .fetch_optional(&s.pool)
        .await
        .map_err(db)?;
    Ok(id.map(|id| User { id, email }))
}

pub(crate) async fn bootstrap(s: &PgStore, email: &str, slug: &str, name: &str, hash: &str) -> StoreResult<bool> {
    validate::email("email", email)?;
    validate_slug("slug", slug)?;
    let mut tx = s.begin().await?;
    // Instances starting at once on an empty database: the first takes
    // the lock and bootstraps, the others wait and then see its user.
    sqlx::query("LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE").execute(&mut *tx.conn).await.map_err(db)?;
    let any: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM users)").fetch_one(&mut *tx.conn).await.map_err(db)?;
    if any {
        return Ok(false);
    }
    let user = rows::ensure_user(&mut tx.conn, email).await?;
    shared::failpoint("bootstrap-user");
    let ws: i64 =
        sqlx::query_scalar("INSERT INTO workspaces (slug, name, created_at) VALUES ($1, $2, now()) RETURNING id")
            .bind(slug)
            .bind(name)
            .fetch_one(&mut *tx.conn)
            .await
            .map_err(db)?;
    sqlx::query("INSERT INTO members (workspace_id, user_id, role, added_at) VALUES ($1, $2, 'owner', now())")
        .bind(ws)
        .bind(user.id)
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    for (kind, prefix) in DEFAULT_KINDS {
        sqlx::query("INSERT INTO kinds (workspace_id, name, prefix) VALUES ($1, $2, $3)")
            .bind(ws)
            .bind(kind)
            .bind(prefix)
            .execute(&mut *tx.conn)
            .await
            .map_err(db)?;
    }
    shared::failpoint("bootstrap-workspace");
    sqlx::query("INSERT INTO tokens (user_id, name, hash, created_at) VALUES ($1, 'bootstrap', $2, now())")
        .bind(user.id)
        .bind(hash)
        .execute(&mut *tx.conn)
        .await
        .map_err(db)?;
    shared::failpoint("bootstrap-token");
    tx.commit().await?;
    Ok(true)
}

pub(crate) async fn create_session(s: &PgStore, token_id: i64, hash: &str, ttl_seconds: i64) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO sessions (hash, token_id, created_at, expires_at)
         VALUES ($1, $2, now(), now() + make_interval(secs => $3))",
    )
    .bind(hash)
    .bind(token_id)
    .bind(ttl_seconds as f64)
    .execute(&s.pool)
    .await
    .map_err(db)?;
    Ok(())
}

pub(crate) async fn authenticate_session(s: &PgStore, hash: &str) -> StoreResult<Option<Principal>> {
    let row = sqlx::query(
        "SELECT t.id AS token_id, t.workspace_id, t.role AS scope_role, u.id AS user_id, u.email
         FROM sessions s JOIN tokens t ON t.id = s.token_id JOIN users u ON u.id = t.user_id
         WHERE s.hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now() AND t.revoked_at IS NULL",
    )
    .bind(hash)
    .fetch_optional(&s.pool)
    .await
    .map_err(db)?;
    row.as_ref().map(rows::principal_from_row).transpose()
}

pub(crate) async fn revoke_session(s: &PgStore, hash: &str) -> StoreResult<()> {
    sqlx::query("UPDATE sessions SET revoked_at = now() WHERE hash = $1 AND revoked_at IS NULL")
        .bind(hash)
        .execute(&s.pool)
        .await
        .map_err(db)?;
    Ok(())
}

pub(crate) async fn list_kinds(s: &PgStore, ws: &Workspace) -> StoreResult<Vec<Kind>> {
    let rows = sqlx::query("SELECT name, prefix FROM kinds WHERE workspace_id = $1 ORDER BY position")
        .bind(ws.id)
        .fetch_all(&s.pool)
        .await
        .map_err(db)?;
    Ok(rows.iter().map(|r| Kind { name: r.get("name"), prefix: r.get("prefix") }).collect())
}

pub(crate) async fn add_kind(s: &PgStore, ws: &Workspace, name: &str, prefix: &str) -> StoreResult<Kind> {
    validate_kind_name("name", name)?;
    validate_prefix("prefix", prefix)?;
    // Insert first and explain afterwards: a clash check before the insert
    // could pass for two concurrent adds of the same kind.
    let added =
        sqlx::query("INSERT INTO kinds (workspace_id, name, prefix) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
            .bind(ws.id)
            .bind(name)
            .bind(prefix)
            .execute(&s.pool)
            .await
            .map_err(db)?
            .rows_affected();
    if added == 0 {
        let existing: String =
            sqlx::query_scalar("SELECT name FROM kinds WHERE workspace_id = $1 AND (name = $2 OR prefix = $3)")
                .bind(ws.id)
                .bind(name)
                .bind(prefix)
                .fetch_one(&s.pool)
                .await
                .map_err(db)?;
        return Err(StoreError::invalid(
            if existing == name { "name" } else { "prefix" },
            format!("clashes with kind {existing:?}"),
        ));
    }
    Ok(Kind { name: name.into(), prefix: prefix.into() })
}
