//! Users, workspaces, members, tokens, web sessions and kinds on SQLite.
//! Each write flow is the only writer while it runs, so the `lock_*` steps
//! have nothing to take; reads run on the read connections.

use async_trait::async_trait;
use pad_core::model::{validate_kind_name, validate_prefix, validate_slug};
use pad_core::validate;
use pad_core::{Kind, Member, Principal, Role, Timestamp, TokenInfo, User, Workspace, WorkspaceSettings};
use pad_store::steps::{AccountSteps, Begin};
use pad_store::{AccountOps, Actor, StoreError, StoreResult};

use crate::rows;
use crate::sql::{Col, Db, micros};
use crate::{SqliteStore, Tx};

#[async_trait]
impl AccountOps for SqliteStore {
    async fn has_users(&self) -> StoreResult<bool> {
        let n: i64 = self.read(|c| c.scalar("SELECT COUNT(*) FROM users", [])).await?;
        Ok(n > 0)
    }

    async fn list_workspaces(&self, user: Actor) -> StoreResult<Vec<(Workspace, Role)>> {
        let user_id = user.user_id;
        self.read(move |c| {
            c.all(
                "SELECT w.*, m.role FROM workspaces w JOIN members m ON m.workspace_id = w.id WHERE m.user_id = ?
                 ORDER BY w.slug",
                [user_id],
                |r| Ok((rows::workspace_from_row(r)?, rows::role(r)?)),
            )
        })
        .await
    }

    async fn membership(&self, user: Actor, slug: &str) -> StoreResult<(Workspace, Role)> {
        validate_slug("workspace", slug)?;
        let (user_id, key) = (user.user_id, slug.to_owned());
        self.read(move |c| {
            c.opt(
                "SELECT w.*, m.role FROM workspaces w JOIN members m ON m.workspace_id = w.id
                 WHERE m.user_id = ? AND w.slug = ?",
                (user_id, &key),
                |r| Ok((rows::workspace_from_row(r)?, rows::role(r)?)),
            )
        })
        .await?
        .ok_or_else(|| StoreError::not_found(format!("workspace {slug}")))
    }

    async fn list_members(&self, ws: &Workspace) -> StoreResult<Vec<Member>> {
        let ws_id = ws.id;
        self.read(move |c| {
            c.all(
                "SELECT u.email, m.role, m.added_at FROM members m JOIN users u ON u.id = m.user_id
                 WHERE m.workspace_id = ? ORDER BY m.added_at, u.id",
                [ws_id],
                |r| Ok(Member { email: r.col("email")?, role: rows::role(r)?, added_at: r.ts("added_at")? }),
            )
        })
        .await
    }

    async fn list_tokens(&self, ws: &Workspace, user: Actor) -> StoreResult<Vec<TokenInfo>> {
        let sql = format!(
            "{} WHERE t.revoked_at IS NULL AND (t.workspace_id = ? OR t.user_id = ?) ORDER BY t.id",
            rows::TOKEN_SELECT
        );
        let params = (ws.id, user.user_id);
        self.read(move |c| c.all(&sql, params, rows::token_from_row)).await
    }

    async fn get_token(&self, id: i64) -> StoreResult<TokenInfo> {
        let sql = format!("{} WHERE t.revoked_at IS NULL AND t.id = ?", rows::TOKEN_SELECT);
        self.read(move |c| c.opt(&sql, [id], rows::token_from_row))
            .await?
            .ok_or_else(|| StoreError::not_found(format!("token {id}")))
    }

    async fn revoke_token(&self, id: i64) -> StoreResult<()> {
        let tx = self.begin().await?;
        tx.conn().exec("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (micros(tx.now), id))?;
        tx.commit().await
    }

    async fn authenticate(&self, hash: &str) -> StoreResult<Option<Principal>> {
        let hash = hash.to_owned();
        let found = self
            .read(move |c| {
                c.opt(
                    "SELECT t.id AS token_id, t.last_used_at, t.workspace_id, t.role AS scope_role,
                            COALESCE(t.charged_to, t.minted_by, t.user_id) AS charged_to, u.id AS user_id, u.email
                     FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = ? AND t.revoked_at IS NULL",
                    [&hash],
                    |r| Ok((rows::principal_from_row(r)?, r.col::<Option<i64>>("last_used_at")?)),
                )
            })
            .await?;
        let Some((principal, last)) = found else { return Ok(None) };
        // Record use at most once a minute, so authentication stays off the write path.
        let now = self.clock.read();
        if last.is_none_or(|l| micros(now) - l > 60_000_000) {
            let tx = self.begin().await?;
            tx.conn().exec("UPDATE tokens SET last_used_at = ? WHERE id = ?", (micros(tx.now), principal.token_id))?;
            tx.commit().await?;
        }
        Ok(Some(principal))
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        validate::email("email", email)?;
        let email = email.to_lowercase();
        let key = email.clone();
        let id = self.read(move |c| c.opt("SELECT id FROM users WHERE email = ?", [&key], |r| r.col::<i64>(0))).await?;
        Ok(id.map(|id| User { id, email }))
    }

    async fn create_session(&self, token_id: i64, hash: &str, ttl_seconds: i64) -> StoreResult<()> {
        let tx = self.begin().await?;
        let now = micros(tx.now);
        tx.conn().exec(
            "INSERT INTO sessions (hash, token_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
            (hash, token_id, now, now + ttl_seconds * 1_000_000),
        )?;
        tx.commit().await
    }

    async fn authenticate_session(&self, hash: &str) -> StoreResult<Option<Principal>> {
        let (hash, now) = (hash.to_owned(), micros(self.clock.read()));
        self.read(move |c| {
            c.opt(
                "SELECT t.id AS token_id, t.workspace_id, t.role AS scope_role,
                        COALESCE(t.charged_to, t.minted_by, t.user_id) AS charged_to, u.id AS user_id, u.email
                 FROM sessions s JOIN tokens t ON t.id = s.token_id JOIN users u ON u.id = t.user_id
                 WHERE s.hash = ? AND s.revoked_at IS NULL AND s.expires_at > ? AND t.revoked_at IS NULL",
                (&hash, now),
                rows::principal_from_row,
            )
        })
        .await
    }

    async fn revoke_session(&self, hash: &str) -> StoreResult<bool> {
        let tx = self.begin().await?;
        let revoked = tx
            .conn()
            .exec("UPDATE sessions SET revoked_at = ? WHERE hash = ? AND revoked_at IS NULL", (micros(tx.now), hash))?;
        tx.commit().await?;
        Ok(revoked > 0)
    }

    async fn list_kinds(&self, ws: &Workspace) -> StoreResult<Vec<Kind>> {
        let ws_id = ws.id;
        self.read(move |c| {
            c.all("SELECT name, prefix FROM kinds WHERE workspace_id = ? ORDER BY rowid", [ws_id], |r| {
                Ok(Kind { name: r.col("name")?, prefix: r.col("prefix")? })
            })
        })
        .await
    }

    async fn add_kind(&self, ws: &Workspace, name: &str, prefix: &str) -> StoreResult<Kind> {
        validate_kind_name("name", name)?;
        validate_prefix("prefix", prefix)?;
        let tx = self.begin().await?;
        let clash = tx.conn().opt(
            "SELECT name FROM kinds WHERE workspace_id = ? AND (name = ? OR prefix = ?)",
            (ws.id, name, prefix),
            |r| r.col::<String>(0),
        )?;
        if let Some(existing) = clash {
            return Err(StoreError::invalid(
                if existing == name { "name" } else { "prefix" },
                format!("clashes with kind {existing:?}"),
            ));
        }
        tx.conn().exec("INSERT INTO kinds (workspace_id, name, prefix) VALUES (?, ?, ?)", (ws.id, name, prefix))?;
        tx.commit().await?;
        Ok(Kind { name: name.into(), prefix: prefix.into() })
    }
}
#[async_trait]
impl AccountSteps for Tx {
    async fn lock_first_start(&mut self) -> StoreResult<()> {
        // One writer connection: no other writer runs between the check and the inserts.
        Ok(())
    }

    async fn any_user(&mut self) -> StoreResult<bool> {
        let n: i64 = self.conn().scalar("SELECT COUNT(*) FROM users", [])?;
        Ok(n > 0)
    }

    async fn ensure_user(&mut self, email: &str) -> StoreResult<User> {
        rows::ensure_user(self.conn(), email, self.now)
    }

    async fn insert_workspace(&mut self, slug: &str, name: &str, charged_to: i64) -> StoreResult<Option<Workspace>> {
        self.conn().opt(
            "INSERT INTO workspaces (slug, name, created_at, charged_to) VALUES (?, ?, ?, ?)
             ON CONFLICT (slug) DO NOTHING RETURNING *",
            (slug, name, micros(self.now), charged_to),
            rows::workspace_from_row,
        )
    }

    async fn insert_kind(&mut self, ws: i64, name: &str, prefix: &str) -> StoreResult<()> {
        self.conn().exec("INSERT INTO kinds (workspace_id, name, prefix) VALUES (?, ?, ?)", (ws, name, prefix))?;
        Ok(())
    }

    async fn lock_members(&mut self, _ws: i64) -> StoreResult<()> {
        // Writers are serialized (one writer connection).
        Ok(())
    }

    async fn put_member(&mut self, ws: i64, user: i64, role: Role) -> StoreResult<Timestamp> {
        self.conn().one(
            "INSERT INTO members (workspace_id, user_id, role, added_at) VALUES (?, ?, ?, ?)
             ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = excluded.role RETURNING added_at",
            (ws, user, role.as_str(), micros(self.now)),
            |r| r.ts(0),
        )
    }

    async fn member_role(&mut self, ws: i64, user: i64) -> StoreResult<Option<Role>> {
        self.conn().opt("SELECT role FROM members WHERE workspace_id = ? AND user_id = ?", (ws, user), rows::role)
    }

    async fn member_by_email(&mut self, ws: i64, email: &str) -> StoreResult<Option<(i64, Role)>> {
        self.conn().opt(
            "SELECT m.user_id, m.role FROM members m JOIN users u ON u.id = m.user_id
             WHERE m.workspace_id = ? AND u.email = ?",
            (ws, email.to_lowercase()),
            |r| Ok((r.col("user_id")?, rows::role(r)?)),
        )
    }

    async fn owners(&mut self, ws: i64) -> StoreResult<i64> {
        self.conn().scalar("SELECT COUNT(*) FROM members WHERE workspace_id = ? AND role = 'owner'", [ws])
    }

    async fn delete_member(&mut self, ws: i64, user: i64) -> StoreResult<()> {
        let conn = self.conn();
        conn.exec("DELETE FROM members WHERE workspace_id = ? AND user_id = ?", (ws, user))?;
        conn.exec(
            "UPDATE tokens SET revoked_at = ? WHERE user_id = ? AND workspace_id = ? AND revoked_at IS NULL",
            (micros(self.now), user, ws),
        )?;
        Ok(())
    }

    async fn revoke_minted_for_others(&mut self, ws: i64, user: i64) -> StoreResult<()> {
        self.conn().exec(
            "UPDATE tokens SET revoked_at = ?1
             WHERE minted_by = ?2 AND user_id <> ?2 AND workspace_id = ?3 AND revoked_at IS NULL",
            (micros(self.now), user, ws),
        )?;
        Ok(())
    }

    async fn lock_tokens(&mut self, _user: i64) -> StoreResult<()> {
        // Writers are serialized (one writer connection).
        Ok(())
    }

    async fn live_tokens(&mut self, user: i64) -> StoreResult<i64> {
        self.conn().scalar("SELECT COUNT(*) FROM tokens WHERE user_id = ? AND revoked_at IS NULL", [user])
    }

    /// This flow holds the one write lock, so the row needs no lock of its own.
    async fn lock_settings(&mut self, ws: i64) -> StoreResult<WorkspaceSettings> {
        Ok(self.conn().one("SELECT * FROM workspaces WHERE id = ?", [ws], rows::workspace_from_row)?.settings)
    }

    async fn write_settings(&mut self, ws: i64, next: &WorkspaceSettings) -> StoreResult<Workspace> {
        self.conn().one(
            "UPDATE workspaces SET default_ttl_seconds = ?, max_ttl_seconds = ?, quarantine_after_expiries = ?,
                    quarantine_after_failures = ?, max_hold_seconds = ?
             WHERE id = ? RETURNING *",
            (
                i64::from(next.default_ttl_seconds),
                i64::from(next.max_ttl_seconds),
                i64::from(next.quarantine_after_expiries),
                i64::from(next.quarantine_after_failures),
                next.max_hold_seconds.map(i64::from),
                ws,
            ),
            rows::workspace_from_row,
        )
    }

    async fn insert_token(
        &mut self, user: i64, name: &str, hash: &str, scope: Option<(i64, Role)>, minted_by: i64, charged_to: i64,
    ) -> StoreResult<TokenInfo> {
        let conn = self.conn();
        let id: i64 = conn.scalar(
            "INSERT INTO tokens (user_id, name, hash, created_at, workspace_id, role, minted_by, charged_to)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                user,
                name,
                hash,
                micros(self.now),
                scope.map(|s| s.0),
                scope.map(|s| s.1.as_str()),
                minted_by,
                charged_to,
            ),
        )?;
        conn.one(&format!("{} WHERE t.id = ?", rows::TOKEN_SELECT), [id], rows::token_from_row)
    }
}
