//! One connection to either backend, and what `pad db migrate` asks of it:
//! its tables and columns as the database itself reports them, rows read in
//! a stable order, rows written in batches, and id counters.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::Value as Json;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgRow};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteRow};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Postgres, QueryBuilder, Row, Sqlite};

use crate::MoveError;
use crate::value::{Phys, Value};

/// Tables that belong to the tooling, not to pad's data.
const MIGRATIONS_TABLE: &str = "_sqlx_migrations";

/// A store's location: `sqlite://PATH` (or `sqlite:PATH`) or `postgres://…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbUrl {
    Sqlite(PathBuf),
    Postgres(String),
}

impl DbUrl {
    pub fn parse(url: &str) -> Result<DbUrl, MoveError> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            PgConnectOptions::from_str(url)
                .map_err(|e| MoveError::Usage(format!("not a PostgreSQL URL ({}): {e}", redact(url))))?;
            return Ok(DbUrl::Postgres(url.to_string()));
        }
        match url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
            Some(path) if !path.is_empty() => Ok(DbUrl::Sqlite(PathBuf::from(path))),
            _ => Err(MoveError::Usage(format!(
                "{url:?} is not a store URL: use sqlite://PATH or postgres://USER@HOST/DATABASE"
            ))),
        }
    }

    /// The URL without its password, fit for messages.
    pub fn display(&self) -> String {
        match self {
            DbUrl::Sqlite(p) => format!("sqlite://{}", p.display()),
            DbUrl::Postgres(u) => redact(u),
        }
    }
}

fn redact(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, rest)), Some(at)) => {
            let userinfo = &url[scheme.len() + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{scheme}://{user}:***{}", &url[at..]),
                None => format!("{scheme}://{rest}"),
            }
        }
        _ => url.to_string(),
    }
}

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

pub fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

pub enum Db {
    Sqlite(SqliteConnection),
    Postgres(PgConnection),
}

fn db_err(what: &str) -> impl FnOnce(sqlx::Error) -> MoveError + '_ {
    move |e| MoveError::Failed(format!("{what}: {e}"))
}

impl Db {
    /// Connects; a SQLite store must exist unless `create` is set, and is
    /// opened read-only unless `write` is.
    pub async fn connect(url: &DbUrl, write: bool) -> Result<Db, MoveError> {
        match url {
            DbUrl::Sqlite(path) => {
                if !write && !path.exists() {
                    return Err(MoveError::Usage(format!("there is no SQLite store at {}", path.display())));
                }
                let opts = SqliteConnectOptions::new()
                    .filename(path)
                    .read_only(!write)
                    .busy_timeout(Duration::from_secs(30))
                    .foreign_keys(true);
                let conn = opts.connect().await.map_err(db_err(&url.display()))?;
                Ok(Db::Sqlite(conn))
            }
            DbUrl::Postgres(u) => {
                let opts = PgConnectOptions::from_str(u).map_err(|e| MoveError::Usage(e.to_string()))?;
                let conn = opts.connect().await.map_err(db_err(&url.display()))?;
                Ok(Db::Postgres(conn))
            }
        }
    }

    pub async fn close(self) {
        let _ = match self {
            Db::Sqlite(c) => c.close().await,
            Db::Postgres(c) => c.close().await,
        };
    }

    pub async fn execute(&mut self, sql: &str) -> Result<(), MoveError> {
        let text = || AssertSqlSafe(sql.to_string());
        match self {
            Db::Sqlite(c) => sqlx::raw_sql(text()).execute(c).await.map(drop),
            Db::Postgres(c) => sqlx::raw_sql(text()).execute(c).await.map(drop),
        }
        .map_err(db_err(sql))
    }

    /// Starts the one read transaction every read of the copy happens in:
    /// a consistent snapshot of a store that may be serving (SQLite in WAL
    /// mode pins the snapshot at the first read and does not block the
    /// writer; PostgreSQL's REPEATABLE READ sees one snapshot throughout).
    pub async fn begin_snapshot(&mut self) -> Result<(), MoveError> {
        match self {
            Db::Sqlite(_) => {
                self.execute("BEGIN").await?;
                // The snapshot starts at the first read.
                self.scalar_i64("SELECT count(*) FROM sqlite_master").await.map(drop)
            }
            Db::Postgres(_) => self.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await,
        }
    }

    pub async fn begin_write(&mut self) -> Result<(), MoveError> {
        match self {
            Db::Sqlite(_) => self.execute("BEGIN IMMEDIATE").await,
            Db::Postgres(_) => self.execute("BEGIN").await,
        }
    }

    pub async fn scalar_i64(&mut self, sql: &str) -> Result<i64, MoveError> {
        let text = || AssertSqlSafe(sql.to_string());
        let v: Option<i64> = match self {
            Db::Sqlite(c) => sqlx::query(text()).fetch_one(c).await.and_then(|r| r.try_get(0)),
            Db::Postgres(c) => sqlx::query(text()).fetch_one(c).await.and_then(|r| r.try_get(0)),
        }
        .map_err(db_err(sql))?;
        Ok(v.unwrap_or(0))
    }

    /// Runs `sql` (with at most one text argument) and answers every column
    /// of every row as text.
    async fn strings(&mut self, sql: &str, arg: Option<&str>) -> Result<Vec<Vec<Option<String>>>, MoveError> {
        let rows = match self {
            Db::Sqlite(c) => {
                let mut q = sqlx::query(AssertSqlSafe(sql.to_string()));
                if let Some(a) = arg {
                    q = q.bind(a.to_string());
                }
                q.fetch_all(c).await.map(|rows| {
                    rows.iter()
                        .map(|r| (0..r.len()).map(|i| r.try_get::<Option<String>, _>(i).ok().flatten()).collect())
                        .collect()
                })
            }
            Db::Postgres(c) => {
                let mut q = sqlx::query(AssertSqlSafe(sql.to_string()));
                if let Some(a) = arg {
                    q = q.bind(a.to_string());
                }
                q.fetch_all(c).await.map(|rows| {
                    rows.iter()
                        .map(|r| (0..r.len()).map(|i| r.try_get::<Option<String>, _>(i).ok().flatten()).collect())
                        .collect()
                })
            }
        };
        rows.map_err(db_err(sql))
    }

    /// SQLite's own consistency check of the whole file.
    pub async fn quick_check(&mut self) -> Result<(), MoveError> {
        let rows = self.strings("PRAGMA quick_check", None).await?;
        let answers: Vec<String> = rows.into_iter().filter_map(|r| r.into_iter().next().flatten()).collect();
        if answers == ["ok"] {
            Ok(())
        } else {
            Err(MoveError::Failed(format!("the copy fails SQLite's check: {}", answers.join("; "))))
        }
    }

    /// Names of pad's tables (not the migrations table, not SQLite's own).
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
        Ok(rows.into_iter().filter_map(|r| r.into_iter().next().flatten()).filter(|n| n != MIGRATIONS_TABLE).collect())
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
        let sql = "SELECT CAST(version AS TEXT) FROM _sqlx_migrations WHERE success ORDER BY version";
        let rows = self.strings(sql, None).await?;
        let mut versions: Vec<i64> =
            rows.into_iter().filter_map(|r| r[0].as_deref().and_then(|v| v.parse().ok())).collect();
        // Sorted as numbers here: one dialect may order the column as text
        // (1, 10, 2), and from the tenth migration on the lists would differ.
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

    /// Reads `columns` of `table` in its write order, each value as stored.
    pub fn rows<'a>(&'a mut self, table: &Table, columns: &[Column]) -> BoxStream<'a, Result<Vec<Value>, MoveError>> {
        let select: Vec<String> = columns
            .iter()
            .map(|c| match (&*self, c.phys) {
                // Read integers and JSON in one width/type whatever the column's.
                (Db::Postgres(_), Phys::Int) => format!("{}::int8", quote(&c.name)),
                (Db::Postgres(_), Phys::Real) => format!("{}::float8", quote(&c.name)),
                (Db::Postgres(_), Phys::Json) => format!("{}::jsonb", quote(&c.name)),
                _ => quote(&c.name),
            })
            .collect();
        let sql = format!("SELECT {} FROM {} ORDER BY {}", select.join(", "), quote(&table.name), table.order_by);
        let phys: Vec<Phys> = columns.iter().map(|c| c.phys).collect();
        let what = format!("reading {}", table.name);
        match self {
            Db::Sqlite(c) => {
                let stream = sqlx::query(AssertSqlSafe(sql)).fetch(c);
                stream
                    .map(move |r| {
                        r.and_then(|row| sqlite_row(&row, &phys)).map_err(|e| MoveError::Failed(format!("{what}: {e}")))
                    })
                    .boxed()
            }
            Db::Postgres(c) => {
                let stream = sqlx::query(AssertSqlSafe(sql)).fetch(c);
                stream
                    .map(move |r| {
                        r.and_then(|row| pg_row(&row, &phys)).map_err(|e| MoveError::Failed(format!("{what}: {e}")))
                    })
                    .boxed()
            }
        }
    }

    /// Inserts rows (values already in this backend's stored form).
    pub async fn insert(&mut self, table: &Table, columns: &[Column], rows: Vec<Vec<Value>>) -> Result<(), MoveError> {
        if rows.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = columns.iter().map(|c| quote(&c.name)).collect();
        let head = format!("INSERT INTO {} ({}) ", quote(&table.name), names.join(", "));
        let phys: Vec<Phys> = columns.iter().map(|c| c.phys).collect();
        let what = format!("writing {}", table.name);
        match self {
            Db::Sqlite(c) => {
                let mut qb = QueryBuilder::<Sqlite>::new(head);
                qb.push_values(rows, |mut b, row| {
                    for (v, p) in row.into_iter().zip(&phys) {
                        match (v, p) {
                            (Value::Int(i), _) => b.push_bind(i),
                            (Value::Real(f), _) => b.push_bind(f),
                            (Value::Text(s), _) => b.push_bind(s),
                            (Value::Bytes(x), _) => b.push_bind(x),
                            (Value::Bool(x), _) => b.push_bind(x),
                            (Value::Null, _) => b.push_bind(None::<i64>),
                            // Converted to stored forms before this point.
                            (Value::Time(_) | Value::Json(_) | Value::TextArray(_), _) => {
                                unreachable!("SQLite stores no {p:?}")
                            }
                        };
                    }
                });
                qb.build().execute(c).await.map(drop).map_err(db_err(&what))
            }
            Db::Postgres(c) => {
                let overriding = if columns.iter().any(|c| c.identity) { "OVERRIDING SYSTEM VALUE " } else { "" };
                let mut qb = QueryBuilder::<Postgres>::new(format!("{head}{overriding}"));
                qb.push_values(rows, |mut b, row| {
                    for (v, p) in row.into_iter().zip(&phys) {
                        // Nulls carry the column's type: PostgreSQL checks it.
                        match (v, p) {
                            (Value::Int(i), _) => b.push_bind(i),
                            (Value::Real(f), _) => b.push_bind(f),
                            (Value::Text(s), _) => b.push_bind(s),
                            (Value::Bytes(x), _) => b.push_bind(x),
                            (Value::Bool(x), _) => b.push_bind(x),
                            (Value::Time(t), _) => b.push_bind(t),
                            (Value::Json(j), _) => b.push_bind(j),
                            (Value::TextArray(a), _) => b.push_bind(a),
                            (Value::Null, Phys::Int) => b.push_bind(None::<i64>),
                            (Value::Null, Phys::Real) => b.push_bind(None::<f64>),
                            (Value::Null, Phys::Text) => b.push_bind(None::<String>),
                            (Value::Null, Phys::Bytes) => b.push_bind(None::<Vec<u8>>),
                            (Value::Null, Phys::Bool) => b.push_bind(None::<bool>),
                            (Value::Null, Phys::Time) => b.push_bind(None::<DateTime<Utc>>),
                            (Value::Null, Phys::Json) => b.push_bind(None::<Json>),
                            (Value::Null, Phys::TextArray) => b.push_bind(None::<Vec<String>>),
                        };
                    }
                });
                qb.build().execute(c).await.map(drop).map_err(db_err(&what))
            }
        }
    }

    /// Sets `column` of the row whose primary key is `key` (second pass for
    /// a table's references to itself, e.g. an item's parent).
    pub async fn update_one(
        &mut self,
        table: &Table,
        key: &[(String, Value)],
        column: &Column,
        value: Value,
    ) -> Result<(), MoveError> {
        let mut pieces = vec![(column.name.clone(), value, column.phys)];
        let mut sql = format!("UPDATE {} SET {} = ", quote(&table.name), quote(&column.name));
        let mut n = 1;
        let placeholder = |n: usize, this: &Db| match this {
            Db::Sqlite(_) => "?".to_string(),
            Db::Postgres(_) => format!("${n}"),
        };
        sql.push_str(&placeholder(n, self));
        for (i, (k, v)) in key.iter().enumerate() {
            n += 1;
            sql.push_str(if i == 0 { " WHERE " } else { " AND " });
            sql.push_str(&format!("{} = {}", quote(k), placeholder(n, self)));
            let phys = table.column(k).map_or(Phys::Int, |c| c.phys);
            pieces.push((k.clone(), v.clone(), phys));
        }
        let what = format!("updating {}", table.name);
        match self {
            Db::Sqlite(c) => {
                let mut q = sqlx::query(AssertSqlSafe(sql));
                for (_, v, _) in pieces {
                    q = match v {
                        Value::Int(i) => q.bind(i),
                        Value::Text(s) => q.bind(s),
                        Value::Real(f) => q.bind(f),
                        Value::Bytes(b) => q.bind(b),
                        Value::Bool(b) => q.bind(b),
                        _ => q.bind(None::<i64>),
                    };
                }
                q.execute(c).await.map(drop).map_err(db_err(&what))
            }
            Db::Postgres(c) => {
                let mut q = sqlx::query(AssertSqlSafe(sql));
                for (_, v, _) in pieces {
                    q = match v {
                        Value::Int(i) => q.bind(i),
                        Value::Text(s) => q.bind(s),
                        Value::Real(f) => q.bind(f),
                        Value::Bytes(b) => q.bind(b),
                        Value::Bool(b) => q.bind(b),
                        Value::Time(t) => q.bind(t),
                        Value::Json(j) => q.bind(j),
                        Value::TextArray(a) => q.bind(a),
                        Value::Null => q.bind(None::<i64>),
                    };
                }
                q.execute(c).await.map(drop).map_err(db_err(&what))
            }
        }
    }

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

    /// Does any of `tables` hold a row? Answers the first that does.
    pub async fn first_nonempty(&mut self, tables: &[String]) -> Result<Option<(String, i64)>, MoveError> {
        for t in tables {
            let n = self.scalar_i64(&format!("SELECT count(*) FROM {}", quote(t))).await?;
            if n > 0 {
                return Ok(Some((t.clone(), n)));
            }
        }
        Ok(None)
    }

    pub async fn count(&mut self, table: &str) -> Result<u64, MoveError> {
        Ok(self.scalar_i64(&format!("SELECT count(*) FROM {}", quote(table))).await? as u64)
    }
}

fn unknown_type(table: &str, column: &str, ty: &str) -> MoveError {
    MoveError::Schema(format!(
        "column {table}.{column} has type {ty:?}, which pad db migrate does not know how to copy \
         (teach it in crates/pad-dbmove/src/value.rs)"
    ))
}

fn sqlite_row(row: &SqliteRow, phys: &[Phys]) -> Result<Vec<Value>, sqlx::Error> {
    let mut out = Vec::with_capacity(phys.len());
    for (i, p) in phys.iter().enumerate() {
        let v = match p {
            Phys::Int | Phys::Bool | Phys::Time => row.try_get::<Option<i64>, _>(i)?.map(Value::Int),
            Phys::Real => row.try_get::<Option<f64>, _>(i)?.map(Value::Real),
            Phys::Text | Phys::Json | Phys::TextArray => row.try_get::<Option<String>, _>(i)?.map(Value::Text),
            Phys::Bytes => row.try_get::<Option<Vec<u8>>, _>(i)?.map(Value::Bytes),
        };
        out.push(v.unwrap_or(Value::Null));
    }
    Ok(out)
}

fn pg_row(row: &PgRow, phys: &[Phys]) -> Result<Vec<Value>, sqlx::Error> {
    let mut out = Vec::with_capacity(phys.len());
    for (i, p) in phys.iter().enumerate() {
        let v = match p {
            Phys::Int => row.try_get::<Option<i64>, _>(i)?.map(Value::Int),
            Phys::Real => row.try_get::<Option<f64>, _>(i)?.map(Value::Real),
            Phys::Text => row.try_get::<Option<String>, _>(i)?.map(Value::Text),
            Phys::Bytes => row.try_get::<Option<Vec<u8>>, _>(i)?.map(Value::Bytes),
            Phys::Bool => row.try_get::<Option<bool>, _>(i)?.map(Value::Bool),
            Phys::Time => row.try_get::<Option<DateTime<Utc>>, _>(i)?.map(Value::Time),
            Phys::Json => row.try_get::<Option<Json>, _>(i)?.map(Value::Json),
            Phys::TextArray => row.try_get::<Option<Vec<String>>, _>(i)?.map(Value::TextArray),
        };
        out.push(v.unwrap_or(Value::Null));
    }
    Ok(out)
}

/// Is there a SQLite database at `path` (a file that is not empty)?
pub fn sqlite_file_exists(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(DbUrl::parse("sqlite:///tmp/a.db").unwrap(), DbUrl::Sqlite("/tmp/a.db".into()));
        assert_eq!(DbUrl::parse("sqlite:rel.db").unwrap(), DbUrl::Sqlite("rel.db".into()));
        assert!(matches!(DbUrl::parse("postgres://u:pw@h/db").unwrap(), DbUrl::Postgres(_)));
        assert!(matches!(DbUrl::parse("/tmp/a.db"), Err(MoveError::Usage(_))));
        assert!(matches!(DbUrl::parse("mysql://x"), Err(MoveError::Usage(_))));
        assert_eq!(DbUrl::parse("postgres://u:pw@h/db").unwrap().display(), "postgres://u:***@h/db");
        assert_eq!(DbUrl::parse("postgres://u@h/db").unwrap().display(), "postgres://u@h/db");
    }
}
