//! The import steps of `pad_store::steps::import` (docs/api.md, "Import"):
//! the record of each import by key, and the kind check. Two imports of
//! one key take turns on an advisory lock on the key.

use async_trait::async_trait;
use pad_core::Timestamp;
use pad_store::steps::ImportSteps;
use pad_store::{Actor, StoreResult};

use crate::{Tx, db};

/// The class of the advisory lock an import takes on its key (two-key form,
/// which does not overlap the one-key space).
const IMPORT_LOCK_CLASS: i32 = 0x7061_6469; // "padi"

#[async_trait]
impl ImportSteps for Tx {
    async fn find_import(&mut self, ws: i64, key: &str) -> StoreResult<Option<String>> {
        // Two imports of one key at once: the second waits here until the
        // first commits (then reads its record: each statement sees what
        // committed before it) or rolls back (then imports itself). Keys
        // whose hashes collide only take turns.
        sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2::text || ':' || $3))")
            .bind(IMPORT_LOCK_CLASS)
            .bind(ws)
            .bind(key)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        sqlx::query_scalar("SELECT result FROM imports WHERE workspace_id = $1 AND import_key = $2")
            .bind(ws)
            .bind(key)
            .fetch_optional(&mut *self.conn)
            .await
            .map_err(db)
    }

    async fn insert_import(
        &mut self, ws: i64, key: &str, actor: Actor, at: Timestamp, result: &str,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO imports (workspace_id, import_key, created_by, created_at, result) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(ws)
        .bind(key)
        .bind(actor.user_id)
        .bind(at)
        .bind(result)
        .execute(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn kind_clash(&mut self, ws: i64, name: &str, prefix: &str) -> StoreResult<Option<(String, String)>> {
        sqlx::query_as("SELECT name, prefix FROM kinds WHERE workspace_id = $1 AND (name = $2 OR prefix = $3)")
            .bind(ws)
            .bind(name)
            .bind(prefix)
            .fetch_optional(&mut *self.conn)
            .await
            .map_err(db)
    }
}
