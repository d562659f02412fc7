//! `Store::update_settings` (docs/api.md, "Workspace settings").

use pad_core::Workspace;
use pad_core::settings::SettingsPatch;
use pad_store::StoreResult;

use crate::{SqliteStore, db, rows};

impl SqliteStore {
    /// Read, check and write inside one `BEGIN IMMEDIATE` transaction, so
    /// two owners' changes cannot interleave into a default above the maximum.
    pub(crate) async fn update_settings_tx(&self, ws: &Workspace, patch: &SettingsPatch) -> StoreResult<Workspace> {
        let crate::Tx { conn: mut tx, now: _ } = pad_store::steps::Begin::begin(self).await?;
        let row =
            sqlx::query("SELECT * FROM workspaces WHERE id = ?").bind(ws.id).fetch_one(&mut *tx).await.map_err(db)?;
        let current = rows::workspace_from_row(&row)?;
        let next = patch.apply(&current.settings, |s| s.field().to_string())?;
        let row = sqlx::query(
            "UPDATE workspaces SET default_ttl_seconds = ?, max_ttl_seconds = ?, quarantine_after_expiries = ?,
                    quarantine_after_failures = ?
             WHERE id = ? RETURNING *",
        )
        .bind(i64::from(next.default_ttl_seconds))
        .bind(i64::from(next.max_ttl_seconds))
        .bind(i64::from(next.quarantine_after_expiries))
        .bind(i64::from(next.quarantine_after_failures))
        .bind(ws.id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        let updated = rows::workspace_from_row(&row)?;
        tx.commit().await.map_err(db)?;
        Ok(updated)
    }
}
