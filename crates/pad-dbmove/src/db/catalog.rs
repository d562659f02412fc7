//! What a database says about itself: pad's tables, their columns, keys
//! and write order, and the migrations that ran on it.

use super::{Db, quote};
use crate::MoveError;
use crate::value::Phys;

/// Tables that hold no pad data: the tooling's migrations table, and
/// PostgreSQL's `ready_waiters`, which names the instances serving now
/// (docs/api.md, "Wake-ups only while someone waits") and means nothing
/// to another database.
const NOT_DATA: [&str; 2] = ["_sqlx_migrations", "ready_waiters"];

#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub phys: Phys,
    /// Filled in by the database: a PostgreSQL identity column.
    pub identity: bool,
    /// Computed by the database; never written.
    pub generated: bool,
}

#[derive(Debug, Clone)]
pub struct Table {
    pub name: String,
    pub columns: Vec<Column>,
    /// SQL that reads the rows in the order they were written (SQLite's
    /// rowid, PostgreSQL's identity column), so a target that numbers rows
    /// itself (SQLite rowids, `kinds.position`) numbers them the same way.
    pub order_by: String,
    pub primary_key: Vec<String>,
    /// The column whose values a counter hands out (a rowid alias or an
    /// identity column), if any.
    pub counter: Option<String>,
    /// (column, referenced table) for each single-column foreign key.
    pub foreign_keys: Vec<(String, String)>,
}

impl Table {
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }
}

impl Db {
    /// Names of pad's tables (not [`NOT_DATA`], not SQLite's own).
    pub async fn table_names(&mut self) -> Result<Vec<String>, MoveError> {
        let sql = match self {
            Db::Sqlite(_) => {
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' \
                 ORDER BY name"
            }
            Db::Postgres(_) => {
                "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') ORDER BY 1"
            }
        };
        let rows = self.strings(sql, None).await?;
        Ok(rows
            .into_iter()
            .filter_map(|r| r.into_iter().next().flatten())
            .filter(|n| !NOT_DATA.contains(&n.as_str()))
            .collect())
    }

    /// The versions of the migrations applied, or `None` if this is not a
    /// database that pad's migrations ever ran on.
    pub async fn migration_versions(&mut self) -> Result<Option<Vec<i64>>, MoveError> {
        let present = match self {
            Db::Sqlite(_) => {
                self.scalar_i64("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'")
                    .await?
            }
            Db::Postgres(_) => {
                self.scalar_i64("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = '_sqlx_migrations'").await?
            }
        };
        if present == 0 {
            return Ok(None);
        }
        let sql = "SELECT CAST(version AS TEXT) FROM _sqlx_migrations WHERE success";
        let rows = self.strings(sql, None).await?;
        // Sorted as numbers here: PostgreSQL would order by the text the
        // cast makes (1, 12, 2, …), SQLite by the number.
        let mut versions: Vec<i64> =
            rows.into_iter().filter_map(|r| r[0].as_deref().and_then(|v| v.parse().ok())).collect();
        versions.sort_unstable();
        Ok(Some(versions))
    }

    /// A table as the database describes it.
    pub async fn describe(&mut self, table: &str) -> Result<Table, MoveError> {
        match self {
            Db::Sqlite(_) => self.describe_sqlite(table).await,
            Db::Postgres(_) => self.describe_postgres(table).await,
        }
    }

    async fn describe_sqlite(&mut self, table: &str) -> Result<Table, MoveError> {
        let sql = self
            .strings("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", Some(table))
            .await?
            .into_iter()
            .next()
            .and_then(|r| r[0].clone())
            .unwrap_or_default()
            .to_ascii_uppercase();
        let info = self
            .strings(
                "SELECT name, type, CAST(pk AS TEXT), CAST(hidden AS TEXT) FROM pragma_table_xinfo(?) ORDER BY cid",
                Some(table),
            )
            .await?;
        let mut columns = Vec::new();
        let mut pk: Vec<(i64, String, String)> = Vec::new();
        for r in info {
            let name = r[0].clone().unwrap_or_default();
            let decl = r[1].clone().unwrap_or_default();
            let phys = Phys::from_sqlite(&decl).ok_or_else(|| unknown_type(table, &name, &decl))?;
            let pk_pos: i64 = r[2].as_deref().and_then(|v| v.parse().ok()).unwrap_or(0);
            let hidden: i64 = r[3].as_deref().and_then(|v| v.parse().ok()).unwrap_or(0);
            if pk_pos > 0 {
                pk.push((pk_pos, name.clone(), decl.to_ascii_uppercase()));
            }
            columns.push(Column { name, phys, identity: false, generated: hidden >= 2 });
        }
        pk.sort();
        // A lone INTEGER PRIMARY KEY is the rowid, which SQLite numbers.
        let counter = match pk.as_slice() {
            [(_, name, decl)] if decl == "INTEGER" => Some(name.clone()),
            _ => None,
        };
        let primary_key: Vec<String> = pk.into_iter().map(|(_, n, _)| n).collect();
        let order_by = if sql.contains("WITHOUT ROWID") {
            primary_key.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", ")
        } else {
            "rowid".to_string()
        };
        let fks = self.strings("SELECT \"from\", \"table\" FROM pragma_foreign_key_list(?)", Some(table)).await?;
        let foreign_keys = fks.into_iter().filter_map(|r| Some((r[0].clone()?, r[1].clone()?))).collect();
        Ok(Table { name: table.to_string(), columns, order_by, primary_key, counter, foreign_keys })
    }

    async fn describe_postgres(&mut self, table: &str) -> Result<Table, MoveError> {
        const RELID: &str = "(SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                             WHERE n.nspname = current_schema() AND c.relname = $1)";
        let info = self
            .strings(
                &format!(
                    "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.attidentity::text, \
                            a.attgenerated::text \
                     FROM pg_attribute a WHERE a.attrelid = {RELID} AND a.attnum > 0 AND NOT a.attisdropped \
                     ORDER BY a.attnum"
                ),
                Some(table),
            )
            .await?;
        let mut columns = Vec::new();
        for r in info {
            let name = r[0].clone().unwrap_or_default();
            let ty = r[1].clone().unwrap_or_default();
            let phys = Phys::from_postgres(&ty).ok_or_else(|| unknown_type(table, &name, &ty))?;
            let identity = r[2].as_deref().is_some_and(|v| !v.is_empty());
            let generated = r[3].as_deref().is_some_and(|v| !v.is_empty());
            columns.push(Column { name, phys, identity, generated });
        }
        let primary_key: Vec<String> = self
            .strings(
                &format!(
                    "SELECT a.attname::text FROM pg_index i \
                     JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) \
                     WHERE i.indrelid = {RELID} AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)"
                ),
                Some(table),
            )
            .await?
            .into_iter()
            .filter_map(|r| r[0].clone())
            .collect();
        let identities: Vec<&Column> = columns.iter().filter(|c| c.identity).collect();
        let counter = match identities.as_slice() {
            [one] => Some(one.name.clone()),
            _ => None,
        };
        let order_by = counter
            .as_ref()
            .map_or_else(|| primary_key.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", "), |c| quote(c));
        let fks = self
            .strings(
                &format!(
                    "SELECT a.attname::text, cf.relname::text FROM pg_constraint k \
                     JOIN pg_class cf ON cf.oid = k.confrelid \
                     JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1] \
                     WHERE k.contype = 'f' AND k.conrelid = {RELID}"
                ),
                Some(table),
            )
            .await?;
        let foreign_keys = fks.into_iter().filter_map(|r| Some((r[0].clone()?, r[1].clone()?))).collect();
        Ok(Table { name: table.to_string(), columns, order_by, primary_key, counter, foreign_keys })
    }
}

fn unknown_type(table: &str, column: &str, ty: &str) -> MoveError {
    MoveError::Schema(format!(
        "column {table}.{column} has type {ty:?}, which pad db migrate does not know how to copy \
         (teach it in crates/pad-dbmove/src/value.rs)"
    ))
}
