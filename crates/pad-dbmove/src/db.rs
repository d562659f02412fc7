//! One connection to either backend, and what `pad db migrate` asks of it:
//! its tables and columns as the database itself reports them, rows read in
//! a stable order, rows written in batches, and id counters. This file is the
//! connection: opening, transactions, the plain queries the others build on.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Row};

use crate::MoveError;

mod catalog;
mod counters;
mod rows;
pub use catalog::{Column, Table};

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
                let opts = pad_postgres::connect_options(u).await.map_err(|e| MoveError::Usage(e.to_string()))?;
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
