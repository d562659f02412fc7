//! Users, workspaces, members, tokens, web sessions and kinds.

use async_trait::async_trait;
use pad_core::model::{validate_kind_name, validate_prefix, validate_slug};
use pad_core::validate;
use pad_core::{Kind, Member, Principal, Role, Timestamp, TokenInfo, User, Workspace};
use pad_store::steps::{AccountSteps, Begin, WriteTx};
use pad_store::{Actor, StoreError, StoreResult};
use sqlx::Row;

use crate::rows::{self, micros, ts};
use crate::{SqliteStore, Tx, db};

pub(crate) async fn has_users(s: &SqliteStore) -> StoreResult<bool> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users").fetch_one(&s.reader).await.map_err(db)?;
    Ok(n > 0)
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

#[async_trait]
impl AccountSteps for Tx {
    async fn lock_first_start(&mut self) -> StoreResult<()> {
        // BEGIN IMMEDIATE: no other writer runs between the check and the inserts.
        Ok(())
    }

    async fn any_user(&mut self) -> StoreResult<bool> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users").fetch_one(&mut *self.conn).await.map_err(db)?;
        Ok(n > 0)
    }

    async fn ensure_user(&mut self, email: &str) -> StoreResult<User> {
        rows::ensure_user(&mut self.conn, email, self.now).await
    }

    async fn insert_workspace(&mut self, slug: &str, name: &str) -> StoreResult<Option<Workspace>> {
        let row = sqlx::query(
            "INSERT INTO workspaces (slug, name, created_at) VALUES (?, ?, ?)
             ON CONFLICT (slug) DO NOTHING RETURNING *",
        )
        .bind(slug)
        .bind(name)
        .bind(micros(self.now))
        .fetch_optional(&mut *self.conn)
        .await
        .map_err(db)?;
        row.as_ref().map(rows::workspace_from_row).transpose()
    }

    async fn insert_kind(&mut self, ws: i64, name: &str, prefix: &str) -> StoreResult<()> {
        sqlx::query("INSERT INTO kinds (workspace_id, name, prefix) VALUES (?, ?, ?)")
            .bind(ws)
            .bind(name)
            .bind(prefix)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn lock_members(&mut self, _ws: i64) -> StoreResult<()> {
        // Writers are serialized (BEGIN IMMEDIATE).
        Ok(())
    }

    async fn put_member(&mut self, ws: i64, user: i64, role: Role) -> StoreResult<Timestamp> {
        let added: i64 = sqlx::query_scalar(
            "INSERT INTO members (workspace_id, user_id, role, added_at) VALUES (?, ?, ?, ?)
             ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = excluded.role RETURNING added_at",
        )
        .bind(ws)
        .bind(user)
        .bind(role.as_str())
        .bind(micros(self.now))
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)?;
        ts(added)
    }

    async fn member_role(&mut self, ws: i64, user: i64) -> StoreResult<Option<Role>> {
        let role: Option<String> =
            sqlx::query_scalar("SELECT role FROM members WHERE workspace_id = ? AND user_id = ?")
                .bind(ws)
                .bind(user)
                .fetch_optional(&mut *self.conn)
                .await
                .map_err(db)?;
        role.as_deref().map(pad_store::rows::role).transpose()
    }

    async fn member_by_email(&mut self, ws: i64, email: &str) -> StoreResult<Option<(i64, Role)>> {
        let row = sqlx::query(
            "SELECT m.user_id, m.role FROM members m JOIN users u ON u.id = m.user_id WHERE m.workspace_id = ? AND u.email = ?",
        )
        .bind(ws)
        .bind(email.to_lowercase())
        .fetch_optional(&mut *self.conn)
        .await
        .map_err(db)?;
        row.map(|row| Ok((row.get("user_id"), rows::role(&row)?))).transpose()
    }

    async fn owners(&mut self, ws: i64) -> StoreResult<i64> {
        sqlx::query_scalar("SELECT COUNT(*) FROM members WHERE workspace_id = ? AND role = 'owner'")
            .bind(ws)
            .fetch_one(&mut *self.conn)
            .await
            .map_err(db)
    }

    async fn delete_member(&mut self, ws: i64, user: i64) -> StoreResult<()> {
        sqlx::query("DELETE FROM members WHERE workspace_id = ? AND user_id = ?")
            .bind(ws)
            .bind(user)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        sqlx::query("UPDATE tokens SET revoked_at = ? WHERE user_id = ? AND workspace_id = ? AND revoked_at IS NULL")
            .bind(micros(self.now))
            .bind(user)
            .bind(ws)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn lock_tokens(&mut self, _user: i64) -> StoreResult<()> {
        // Writers are serialized (BEGIN IMMEDIATE).
        Ok(())
    }

    async fn live_tokens(&mut self, user: i64) -> StoreResult<i64> {
        sqlx::query_scalar("SELECT COUNT(*) FROM tokens WHERE user_id = ? AND revoked_at IS NULL")
            .bind(user)
            .fetch_one(&mut *self.conn)
            .await
            .map_err(db)
    }

    async fn insert_token(
        &mut self,
        user: i64,
        name: &str,
        hash: &str,
        scope: Option<(i64, Role)>,
    ) -> StoreResult<TokenInfo> {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO tokens (user_id, name, hash, created_at, workspace_id, role) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(user)
        .bind(name)
        .bind(hash)
        .bind(micros(self.now))
        .bind(scope.map(|s| s.0))
        .bind(scope.map(|s| s.1.as_str()))
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)?;
        let sql = format!("{} WHERE t.id = ?", rows::TOKEN_SELECT);
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&mut *self.conn).await.map_err(db)?;
        rows::token_from_row(&row)
    }
}
