//! `Store::update_settings` (docs/api.md, "Workspace settings").

use pad_core::Workspace;
use pad_core::settings::SettingsPatch;
use pad_store::StoreResult;
use pad_store::steps::Begin;

use crate::sql::Db;
use crate::{SqliteStore, rows};

impl SqliteStore {
    /// Read, check and write inside one write flow, so two owners' changes
    /// cannot interleave into a default above the maximum.
    pub(crate) async fn update_settings_tx(&self, ws: &Workspace, patch: &SettingsPatch) -> StoreResult<Workspace> {
        let tx = self.begin().await?;
        let current = tx.conn().one("SELECT * FROM workspaces WHERE id = ?", [ws.id], rows::workspace_from_row)?;
        let next = patch.apply(&current.settings, |s| s.field().to_string())?;
        let updated = tx.conn().one(
            "UPDATE workspaces SET default_ttl_seconds = ?, max_ttl_seconds = ?, quarantine_after_expiries = ?,
                    quarantine_after_failures = ?, max_hold_seconds = ?
             WHERE id = ? RETURNING *",
            (
                i64::from(next.default_ttl_seconds),
                i64::from(next.max_ttl_seconds),
                i64::from(next.quarantine_after_expiries),
                i64::from(next.quarantine_after_failures),
                next.max_hold_seconds.map(i64::from),
                ws.id,
            ),
            rows::workspace_from_row,
        )?;
        tx.commit().await?;
        Ok(updated)
    }
}
