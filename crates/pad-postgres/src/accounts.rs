//! Users, workspaces, members, tokens, web sessions and kinds on
//! PostgreSQL, where many instances write at once: the `lock_*` steps take
//! a table, workspace or user row lock until commit.

use async_trait::async_trait;
use pad_core::model::{validate_kind_name, validate_prefix, validate_slug};
use pad_core::validate;
use pad_core::{Kind, Member, Principal, Role, Timestamp, TokenInfo, User, Workspace, WorkspaceSettings};
use pad_store::steps::AccountSteps;
use pad_store::{AccountOps, Actor, StoreError, StoreResult};
use sqlx::Row;

use crate::rows;
use crate::{PgStore, Tx, db};

#[async_trait]
impl AccountOps for PgStore {
    async fn has_users(&self) -> StoreResult<bool> {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM users)").fetch_one(&self.pool).await.map_err(db)
    }

    async fn list_workspaces(&self, user: Actor) -> StoreResult<Vec<(Workspace, Role)>> {
        let rows = sqlx::query("SELECT w.*, m.role FROM workspaces w JOIN members m ON m.workspace_id = w.id WHERE m.user_id = $1 ORDER BY w.slug")
            .bind(user.user_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        rows.iter().map(|r| Ok((rows::workspace_from_row(r)?, rows::role(r)?))).collect()
    }

    async fn membership(&self, user: Actor, slug: &str) -> StoreResult<(Workspace, Role)> {
        validate_slug("workspace", slug)?;
        let row = sqlx::query("SELECT w.*, m.role FROM workspaces w JOIN members m ON m.workspace_id = w.id WHERE m.user_id = $1 AND w.slug = $2")
            .bind(user.user_id)
            .bind(slug)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .ok_or_else(|| StoreError::not_found(format!("workspace {slug}")))?;
        Ok((rows::workspace_from_row(&row)?, rows::role(&row)?))
    }

    async fn list_members(&self, ws: &Workspace) -> StoreResult<Vec<Member>> {
        let rows = sqlx::query("SELECT u.email, m.role, m.added_at FROM members m JOIN users u ON u.id = m.user_id WHERE m.workspace_id = $1 ORDER BY m.added_at, u.id")
            .bind(ws.id)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        rows.iter()
            .map(|r| Ok(Member { email: r.get("email"), role: rows::role(r)?, added_at: r.get("added_at") }))
            .collect()
    }

    async fn list_tokens(&self, ws: &Workspace, user: Actor) -> StoreResult<Vec<TokenInfo>> {
        let sql = format!(
            "{} WHERE t.revoked_at IS NULL AND (t.workspace_id = $1 OR t.user_id = $2) ORDER BY t.id",
            rows::TOKEN_SELECT
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(ws.id)
            .bind(user.user_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        rows.iter().map(rows::token_from_row).collect()
    }

    async fn get_token(&self, id: i64) -> StoreResult<TokenInfo> {
        let sql = format!("{} WHERE t.revoked_at IS NULL AND t.id = $1", rows::TOKEN_SELECT);
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .ok_or_else(|| StoreError::not_found(format!("token {id}")))?;
        rows::token_from_row(&row)
    }

    async fn revoke_token(&self, id: i64) -> StoreResult<()> {
        sqlx::query("UPDATE tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn authenticate(&self, hash: &str) -> StoreResult<Option<Principal>> {
        let row = sqlx::query(
            "SELECT t.id AS token_id, t.workspace_id, t.role AS scope_role,
                    COALESCE(t.charged_to, t.minted_by, t.user_id) AS charged_to, u.id AS user_id, u.email,
                    (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute') AS stale
             FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = $1 AND t.revoked_at IS NULL",
        )
        .bind(hash)
        .fetch_optional(&self.pool)
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
            .execute(&self.pool)
            .await
            .map_err(db)?;
        }
        Ok(Some(rows::principal_from_row(&row)?))
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        validate::email("email", email)?;
        let email = email.to_lowercase();
        let id: Option<i64> = sqlx::query_scalar("SELECT id FROM users WHERE email = $1")
            .bind(&email)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        Ok(id.map(|id| User { id, email }))
    }

    async fn create_session(&self, token_id: i64, hash: &str, ttl_seconds: i64) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO sessions (hash, token_id, created_at, expires_at)
             VALUES ($1, $2, now(), now() + make_interval(secs => $3))",
        )
        .bind(hash)
        .bind(token_id)
        .bind(ttl_seconds as f64)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn authenticate_session(&self, hash: &str) -> StoreResult<Option<Principal>> {
        let row = sqlx::query(
            "SELECT t.id AS token_id, t.workspace_id, t.role AS scope_role,
                    COALESCE(t.charged_to, t.minted_by, t.user_id) AS charged_to, u.id AS user_id, u.email
             FROM sessions s JOIN tokens t ON t.id = s.token_id JOIN users u ON u.id = t.user_id
             WHERE s.hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now() AND t.revoked_at IS NULL",
        )
        .bind(hash)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        row.as_ref().map(rows::principal_from_row).transpose()
    }

    async fn revoke_session(&self, hash: &str) -> StoreResult<bool> {
        let revoked = sqlx::query("UPDATE sessions SET revoked_at = now() WHERE hash = $1 AND revoked_at IS NULL")
            .bind(hash)
            .execute(&self.pool)
            .await
            .map_err(db)?
            .rows_affected();
        Ok(revoked > 0)
    }

    async fn list_kinds(&self, ws: &Workspace) -> StoreResult<Vec<Kind>> {
        let rows = sqlx::query("SELECT name, prefix FROM kinds WHERE workspace_id = $1 ORDER BY position")
            .bind(ws.id)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        Ok(rows.iter().map(|r| Kind { name: r.get("name"), prefix: r.get("prefix") }).collect())
    }

    async fn add_kind(&self, ws: &Workspace, name: &str, prefix: &str) -> StoreResult<Kind> {
        validate_kind_name("name", name)?;
        validate_prefix("prefix", prefix)?;
        // Insert first and explain afterwards: a clash check before the insert
        // could pass for two concurrent adds of the same kind.
        let added =
            sqlx::query("INSERT INTO kinds (workspace_id, name, prefix) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
                .bind(ws.id)
                .bind(name)
                .bind(prefix)
                .execute(&self.pool)
                .await
                .map_err(db)?
                .rows_affected();
        if added == 0 {
            let existing: String =
                sqlx::query_scalar("SELECT name FROM kinds WHERE workspace_id = $1 AND (name = $2 OR prefix = $3)")
                    .bind(ws.id)
                    .bind(name)
                    .bind(prefix)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db)?;
            return Err(StoreError::invalid(
                if existing == name { "name" } else { "prefix" },
                format!("clashes with kind {existing:?}"),
            ));
        }
        Ok(Kind { name: name.into(), prefix: prefix.into() })
    }
}
#[async_trait]
impl AccountSteps for Tx {
    async fn lock_first_start(&mut self) -> StoreResult<()> {
        sqlx::query("LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE").execute(&mut *self.conn).await.map_err(db)?;
        Ok(())
    }

    async fn any_user(&mut self) -> StoreResult<bool> {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM users)").fetch_one(&mut *self.conn).await.map_err(db)
    }

    async fn ensure_user(&mut self, email: &str) -> StoreResult<User> {
        rows::ensure_user(&mut self.conn, email).await
    }

    async fn insert_workspace(&mut self, slug: &str, name: &str, charged_to: i64) -> StoreResult<Option<Workspace>> {
        // `DO NOTHING` waits for a concurrent insert of the same slug and then
        // skips: two instances bootstrapping at once get one workspace, and the
        // loser a validation error it can recognize.
        let row = sqlx::query(
            "INSERT INTO workspaces (slug, name, created_at, charged_to) VALUES ($1, $2, now(), $3)
             ON CONFLICT (slug) DO NOTHING RETURNING *",
        )
        .bind(slug)
        .bind(name)
        .bind(charged_to)
        .fetch_optional(&mut *self.conn)
        .await
        .map_err(db)?;
        row.as_ref().map(rows::workspace_from_row).transpose()
    }

    async fn insert_kind(&mut self, ws: i64, name: &str, prefix: &str) -> StoreResult<()> {
        sqlx::query("INSERT INTO kinds (workspace_id, name, prefix) VALUES ($1, $2, $3)")
            .bind(ws)
            .bind(name)
            .bind(prefix)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn lock_members(&mut self, ws: i64) -> StoreResult<()> {
        sqlx::query("SELECT id FROM workspaces WHERE id = $1 FOR UPDATE")
            .bind(ws)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn put_member(&mut self, ws: i64, user: i64, role: Role) -> StoreResult<Timestamp> {
        sqlx::query_scalar(
            "INSERT INTO members (workspace_id, user_id, role, added_at) VALUES ($1, $2, $3, now())
             ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = excluded.role RETURNING added_at",
        )
        .bind(ws)
        .bind(user)
        .bind(role.as_str())
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)
    }

    async fn member_role(&mut self, ws: i64, user: i64) -> StoreResult<Option<Role>> {
        let role: Option<String> =
            sqlx::query_scalar("SELECT role FROM members WHERE workspace_id = $1 AND user_id = $2")
                .bind(ws)
                .bind(user)
                .fetch_optional(&mut *self.conn)
                .await
                .map_err(db)?;
        role.as_deref().map(pad_store::rows::role).transpose()
    }

    async fn member_by_email(&mut self, ws: i64, email: &str) -> StoreResult<Option<(i64, Role)>> {
        let row = sqlx::query(
            "SELECT m.user_id, m.role FROM members m JOIN users u ON u.id = m.user_id WHERE m.workspace_id = $1 AND u.email = $2",
        )
        .bind(ws)
        .bind(email.to_lowercase())
        .fetch_optional(&mut *self.conn)
        .await
        .map_err(db)?;
        row.map(|row| Ok((row.get("user_id"), rows::role(&row)?))).transpose()
    }

    async fn owners(&mut self, ws: i64) -> StoreResult<i64> {
        sqlx::query_scalar("SELECT COUNT(*) FROM members WHERE workspace_id = $1 AND role = 'owner'")
            .bind(ws)
            .fetch_one(&mut *self.conn)
            .await
            .map_err(db)
    }

    async fn delete_member(&mut self, ws: i64, user: i64) -> StoreResult<()> {
        sqlx::query("DELETE FROM members WHERE workspace_id = $1 AND user_id = $2")
            .bind(ws)
            .bind(user)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        sqlx::query(
            "UPDATE tokens SET revoked_at = now() WHERE user_id = $1 AND workspace_id = $2 AND revoked_at IS NULL",
        )
        .bind(user)
        .bind(ws)
        .execute(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn revoke_minted_for_others(&mut self, ws: i64, user: i64) -> StoreResult<()> {
        sqlx::query(
            "UPDATE tokens SET revoked_at = now()
             WHERE minted_by = $1 AND user_id <> $1 AND workspace_id = $2 AND revoked_at IS NULL",
        )
        .bind(user)
        .bind(ws)
        .execute(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn lock_tokens(&mut self, user: i64) -> StoreResult<()> {
        // The user's row lock serializes its mints across instances.
        sqlx::query("SELECT id FROM users WHERE id = $1 FOR UPDATE")
            .bind(user)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn live_tokens(&mut self, user: i64) -> StoreResult<i64> {
        sqlx::query_scalar("SELECT COUNT(*) FROM tokens WHERE user_id = $1 AND revoked_at IS NULL")
            .bind(user)
            .fetch_one(&mut *self.conn)
            .await
            .map_err(db)
    }

    async fn lock_settings(&mut self, ws: i64) -> StoreResult<WorkspaceSettings> {
        let row = sqlx::query("SELECT * FROM workspaces WHERE id = $1 FOR UPDATE")
            .bind(ws)
            .fetch_one(&mut *self.conn)
            .await
            .map_err(db)?;
        Ok(rows::workspace_from_row(&row)?.settings)
    }

    async fn write_settings(&mut self, ws: i64, next: &WorkspaceSettings) -> StoreResult<Workspace> {
        let n = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
        let row = sqlx::query(
            "UPDATE workspaces SET default_ttl_seconds = $1, max_ttl_seconds = $2, quarantine_after_expiries = $3,
                    quarantine_after_failures = $4, max_hold_seconds = $6
             WHERE id = $5 RETURNING *",
        )
        .bind(n(next.default_ttl_seconds))
        .bind(n(next.max_ttl_seconds))
        .bind(n(next.quarantine_after_expiries))
        .bind(n(next.quarantine_after_failures))
        .bind(ws)
        .bind(next.max_hold_seconds.map(n))
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)?;
        rows::workspace_from_row(&row)
    }

    async fn insert_token(
        &mut self, user: i64, name: &str, hash: &str, scope: Option<(i64, Role)>, minted_by: i64, charged_to: i64,
    ) -> StoreResult<TokenInfo> {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO tokens (user_id, name, hash, created_at, workspace_id, role, minted_by, charged_to)
             VALUES ($1, $2, $3, now(), $4, $5, $6, $7) RETURNING id",
        )
        .bind(user)
        .bind(name)
        .bind(hash)
        .bind(scope.map(|s| s.0))
        .bind(scope.map(|s| s.1.as_str()))
        .bind(minted_by)
        .bind(charged_to)
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)?;
        let sql = format!("{} WHERE t.id = $1", rows::TOKEN_SELECT);
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&mut *self.conn).await.map_err(db)?;
        rows::token_from_row(&row)
    }
}
