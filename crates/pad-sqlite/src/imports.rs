//! The import steps of `pad_store::steps::import` (docs/api.md, "Import"):
//! the record of each import by key, and the kind check. One writer at a
//! time, so two imports of one key already take turns.

use async_trait::async_trait;
use pad_core::Timestamp;
use pad_store::steps::ImportSteps;
use pad_store::{Actor, StoreResult};

use crate::Tx;
use crate::sql::{Col, Db, micros};

#[async_trait]
impl ImportSteps for Tx {
    async fn find_import(&mut self, ws: i64, key: &str) -> StoreResult<Option<String>> {
        // Writers are serialized (one writer connection): no other import
        // of this key can be half-way now.
        self.conn().opt("SELECT result FROM imports WHERE workspace_id = ? AND import_key = ?", (ws, key), |r| {
            r.col::<String>(0)
        })
    }

    async fn insert_import(
        &mut self, ws: i64, key: &str, actor: Actor, at: Timestamp, result: &str,
    ) -> StoreResult<()> {
        self.conn().exec(
            "INSERT INTO imports (workspace_id, import_key, created_by, created_at, result) VALUES (?, ?, ?, ?, ?)",
            (ws, key, actor.user_id, micros(at), result),
        )?;
        Ok(())
    }

    async fn kind_clash(&mut self, ws: i64, name: &str, prefix: &str) -> StoreResult<Option<(String, String)>> {
        self.conn().opt(
            "SELECT name, prefix FROM kinds WHERE workspace_id = ? AND (name = ? OR prefix = ?)",
            (ws, name, prefix),
            |r| Ok((r.col::<String>(0)?, r.col::<String>(1)?)),
        )
    }
}
