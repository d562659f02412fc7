//! `Store::update_settings` (docs/api.md, "Workspace settings").

use pad_core::Workspace;
use pad_core::settings::SettingsPatch;
use pad_store::StoreResult;

use crate::{PgStore, db, rows};

impl PgStore {
    /// Read under `FOR UPDATE`, check and write in one transaction, so two
    /// owners' changes cannot interleave into a default above the maximum.
    pub(crate) async fn update_settings_tx(&self, ws: &Workspace, patch: &SettingsPatch) -> StoreResult<Workspace> {
        let mut tx = pad_store::steps::Begin::begin(self).await?.conn;
        let row = sqlx::query("SELECT * FROM workspaces WHERE id = $1 FOR UPDATE")
            .bind(ws.id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        let current = rows::workspace_from_row(&row)?;
        let next = patch.apply(&current.settings, |s| s.field().to_string())?;
        let row = sqlx::query(
            "UPDATE workspaces SET default_ttl_seconds = $1, max_ttl_seconds = $2, quarantine_after_expiries = $3,
                    quarantine_after_failures = $4, max_hold_seconds = $6
             WHERE id = $5 RETURNING *",
        )
        .bind(i32::try_from(next.default_ttl_seconds).unwrap_or(i32::MAX))
        .bind(i32::try_from(next.max_ttl_seconds).unwrap_or(i32::MAX))
        .bind(i32::try_from(next.quarantine_after_expiries).unwrap_or(i32::MAX))
        .bind(i32::try_from(next.quarantine_after_failures).unwrap_or(i32::MAX))
        .bind(ws.id)
        .bind(next.max_hold_seconds.map(|s| i32::try_from(s).unwrap_or(i32::MAX)))
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        let updated = rows::workspace_from_row(&row)?;
        tx.commit().await.map_err(db)?;
        Ok(updated)
    }
}
