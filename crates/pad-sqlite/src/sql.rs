//! The driver, once: rusqlite's errors mapped to the store's, statements run
//! from rusqlite's prepared-statement cache, rows read by column name, and a
//! builder for the few statements whose text depends on a filter. SQLite
//! only: `pad-postgres` speaks sqlx directly.

use pad_core::Timestamp;
use pad_store::rows::corrupt;
use pad_store::{StoreError, StoreResult};
use rusqlite::types::{FromSql, Value};
use rusqlite::{Connection, ErrorCode, Params, Row, RowIndex};
use serde::de::DeserializeOwned;

/// Maps a driver error once, at this crate's boundary: a busy or full
/// database is unavailable (retrying may help); anything else is a bug.
pub(crate) fn db(e: rusqlite::Error) -> StoreError {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                ErrorCode::DatabaseBusy
                    | ErrorCode::DatabaseLocked
                    | ErrorCode::DiskFull
                    | ErrorCode::SystemIoFailure
                    | ErrorCode::CannotOpen
                    | ErrorCode::ReadOnly
            ) =>
        {
            StoreError::Unavailable(e.to_string())
        }
        _ => StoreError::Internal(e.to_string()),
    }
}

pub(crate) fn micros(t: Timestamp) -> i64 {
    t.timestamp_micros()
}

pub(crate) fn ts(m: i64) -> StoreResult<Timestamp> {
    Timestamp::from_timestamp_micros(m).ok_or_else(|| corrupt("timestamp", format!("{m} is out of range")))
}

/// Statements on one connection, each prepared once per connection and
/// kept in its cache.
pub(crate) trait Db {
    /// Runs a statement that returns no rows; the number of rows changed.
    fn exec(&self, sql: &str, p: impl Params) -> StoreResult<usize>;
    /// The first row, if any, read by `f`.
    fn opt<T>(&self, sql: &str, p: impl Params, f: impl FnOnce(&Row<'_>) -> StoreResult<T>) -> StoreResult<Option<T>>;
    /// Every row, each read by `f`.
    fn all<T>(&self, sql: &str, p: impl Params, f: impl FnMut(&Row<'_>) -> StoreResult<T>) -> StoreResult<Vec<T>>;

    /// The first row; none is a bug (the statement always yields one).
    fn one<T>(&self, sql: &str, p: impl Params, f: impl FnOnce(&Row<'_>) -> StoreResult<T>) -> StoreResult<T> {
        self.opt(sql, p, f)?.ok_or_else(|| StoreError::Internal(format!("no row from: {sql}")))
    }

    /// The first column of the first row.
    fn scalar<T: FromSql>(&self, sql: &str, p: impl Params) -> StoreResult<T> {
        self.one(sql, p, |r| r.col(0))
    }

    /// A statement built with [`Sql`].
    fn all_built<T>(&self, q: &Sql, f: impl FnMut(&Row<'_>) -> StoreResult<T>) -> StoreResult<Vec<T>> {
        self.all(&q.text, rusqlite::params_from_iter(q.params.iter()), f)
    }
}

impl Db for Connection {
    fn exec(&self, sql: &str, p: impl Params) -> StoreResult<usize> {
        self.prepare_cached(sql).and_then(|mut s| s.execute(p)).map_err(db)
    }

    fn opt<T>(&self, sql: &str, p: impl Params, f: impl FnOnce(&Row<'_>) -> StoreResult<T>) -> StoreResult<Option<T>> {
        let mut stmt = self.prepare_cached(sql).map_err(db)?;
        let mut rows = stmt.query(p).map_err(db)?;
        match rows.next().map_err(db)? {
            Some(row) => f(row).map(Some),
            None => Ok(None),
        }
    }

    fn all<T>(&self, sql: &str, p: impl Params, mut f: impl FnMut(&Row<'_>) -> StoreResult<T>) -> StoreResult<Vec<T>> {
        let mut stmt = self.prepare_cached(sql).map_err(db)?;
        let mut rows = stmt.query(p).map_err(db)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(db)? {
            out.push(f(row)?);
        }
        Ok(out)
    }
}

/// Reading a row's columns, with the store's errors.
pub(crate) trait Col {
    fn col<T: FromSql>(&self, c: impl RowIndex) -> StoreResult<T>;

    /// A timestamp stored as microseconds since the epoch.
    fn ts(&self, c: impl RowIndex) -> StoreResult<Timestamp> {
        ts(self.col(c)?)
    }

    fn opt_ts(&self, c: impl RowIndex) -> StoreResult<Option<Timestamp>> {
        self.col::<Option<i64>>(c)?.map(ts).transpose()
    }

    /// A column holding JSON text.
    fn json<T: DeserializeOwned>(&self, c: &str) -> StoreResult<T> {
        serde_json::from_str(&self.col::<String>(c)?).map_err(|e| corrupt(c, e))
    }
}

impl Col for Row<'_> {
    fn col<T: FromSql>(&self, c: impl RowIndex) -> StoreResult<T> {
        self.get(c).map_err(db)
    }
}

/// A statement whose text depends on a filter, with its parameters bound in
/// order: `push` appends text, `bind` a `?` and its value.
#[derive(Debug, Default)]
pub(crate) struct Sql {
    text: String,
    params: Vec<Value>,
}

impl Sql {
    pub(crate) fn new(text: &str) -> Self {
        Sql { text: text.to_string(), params: Vec::new() }
    }

    pub(crate) fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    pub(crate) fn bind(&mut self, v: impl Into<Value>) -> &mut Self {
        self.text.push('?');
        self.params.push(v.into());
        self
    }

    /// ` AND column IN (…)` for a non-empty list; nothing for an empty one.
    pub(crate) fn bind_in<V: Into<Value>>(&mut self, column: &str, values: impl IntoIterator<Item = V>) -> &mut Self {
        let mut values = values.into_iter().peekable();
        if values.peek().is_none() {
            return self;
        }
        self.push(" AND ").push(column).push(" IN (");
        let mut first = true;
        for v in values {
            if !first {
                self.push(", ");
            }
            first = false;
            self.bind(v);
        }
        self.push(")")
    }
}

#[cfg(test)]
mod tests {
    use super::Sql;

    #[test]
    fn bind_in_adds_nothing_for_an_empty_list() {
        let mut q = Sql::new("SELECT 1 WHERE 1");
        q.bind_in("x", Vec::<i64>::new());
        assert_eq!(q.text, "SELECT 1 WHERE 1");
        q.bind_in("x", [1_i64, 2]);
        assert_eq!(q.text, "SELECT 1 WHERE 1 AND x IN (?, ?)");
        assert_eq!(q.params.len(), 2);
    }
}
