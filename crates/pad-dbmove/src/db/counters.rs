//! Id counters: how high a table's counter (SQLite's `sqlite_sequence`,
//! PostgreSQL's sequences) has gone, and setting the copy's above it.

use super::{Db, Table, quote};
use crate::MoveError;

impl Db {
    /// The highest value the counter of `table.column` has handed out
    /// (including ids of rows since deleted, where the database keeps that).
    pub async fn counter_high_water(&mut self, table: &Table, column: &str) -> Result<i64, MoveError> {
        let max = self.scalar_i64(&format!("SELECT max({}) FROM {}", quote(column), quote(&table.name))).await?;
        let kept = match self {
            Db::Sqlite(_) => {
                let has_seq = self
                    .scalar_i64("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'")
                    .await?;
                if has_seq == 0 {
                    0
                } else {
                    let rows = self
                        .strings("SELECT CAST(seq AS TEXT) FROM sqlite_sequence WHERE name = ?", Some(&table.name))
                        .await?;
                    rows.first().and_then(|r| r[0].as_deref()).and_then(|v| v.parse().ok()).unwrap_or(0)
                }
            }
            Db::Postgres(_) => {
                let seq = self
                    .strings(
                        &format!("SELECT pg_get_serial_sequence($1, '{}')", column.replace('\'', "''")),
                        Some(&quote(&table.name)),
                    )
                    .await?;
                match seq.first().and_then(|r| r[0].clone()) {
                    Some(seq) => {
                        self.scalar_i64(&format!(
                            "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM {seq}"
                        ))
                        .await?
                    }
                    None => 0,
                }
            }
        };
        Ok(max.max(kept))
    }

    /// The last value a standalone PostgreSQL sequence handed out (0 if
    /// none yet), or `None` if there is no such sequence (or this is SQLite).
    pub async fn sequence_high(&mut self, sequence: &str) -> Result<Option<i64>, MoveError> {
        if let Db::Sqlite(_) = self {
            return Ok(None);
        }
        let exists = self
            .strings(
                "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = current_schema() AND c.relkind = 'S' AND c.relname = $1",
                Some(sequence),
            )
            .await?;
        if exists.is_empty() {
            return Ok(None);
        }
        let high = self
            .scalar_i64(&format!(
                "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM {}",
                quote(sequence)
            ))
            .await?;
        Ok(Some(high))
    }

    /// Makes the counter of `table.column` hand out values above `high`.
    pub async fn set_counter(&mut self, table: &Table, column: &str, high: i64) -> Result<(), MoveError> {
        if high <= 0 {
            return Ok(());
        }
        match self {
            Db::Sqlite(_) => {
                // Only AUTOINCREMENT tables keep a counter; the others take
                // max(rowid) + 1, which the copied rows already set.
                let kept = self
                    .scalar_i64("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'")
                    .await?;
                if kept > 0 {
                    let name = table.name.replace('\'', "''");
                    self.execute(&format!("UPDATE sqlite_sequence SET seq = max(seq, {high}) WHERE name = '{name}'"))
                        .await?;
                }
                Ok(())
            }
            Db::Postgres(_) => {
                let t = quote(&table.name).replace('\'', "''");
                let c = column.replace('\'', "''");
                self.scalar_i64(&format!("SELECT setval(pg_get_serial_sequence('{t}', '{c}'), {high}, true)"))
                    .await
                    .map(drop)
            }
        }
    }
}
