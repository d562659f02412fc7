//! The one place that knows which backends exist: it turns a
//! `--database-url` into a [`Store`] (docs/operations.md). The server takes
//! any `dyn Store` and names no backend; the binary, the benchmarks and the
//! tests choose one here.

use std::sync::Arc;

use pad_store::{Store, StoreError};

/// Opens the store a `--database-url` names: `postgres://…` or
/// `postgresql://…` (any number of instances may share one), else
/// `sqlite://PATH`, `sqlite:PATH` or a bare path.
pub async fn open_store(database_url: &str) -> Result<Arc<dyn Store>, StoreError> {
    if sqlite_path(database_url).map_err(|m| StoreError::invalid("database_url", m))?.is_none() {
        return Ok(Arc::new(pad_postgres::PgStore::open(database_url).await?));
    }
    Ok(Arc::new(pad_sqlite::SqliteStore::open_url(database_url).await?))
}

/// A PostgreSQL store sized for a fleet of instances: at most
/// `max_connections` connections and `lanes` lease lanes, whatever the
/// environment says (docs/operations.md, "Sizing the PostgreSQL pool").
pub async fn open_postgres_sized(
    database_url: &str, max_connections: u32, lanes: usize,
) -> Result<Arc<dyn Store>, StoreError> {
    Ok(Arc::new(pad_postgres::PgStore::open_sized(database_url, max_connections, lanes).await?))
}

/// The database URL schemes pad accepts, for messages.
pub const DATABASE_SCHEMES: &str = "postgres://, postgresql://, sqlite://PATH, sqlite:PATH or a bare path";

/// Which store a `--database-url` names: `None` for PostgreSQL, the file
/// for SQLite, or why it names neither. Any other `scheme:` is refused, so
/// `mysql://x` is an error rather than a SQLite file called `mysql:/x`.
pub fn sqlite_path(database_url: &str) -> Result<Option<std::path::PathBuf>, String> {
    if database_url.starts_with("postgres://") || database_url.starts_with("postgresql://") {
        return Ok(None);
    }
    if let Some(path) = database_url.strip_prefix("sqlite://").or_else(|| database_url.strip_prefix("sqlite:")) {
        return Ok(Some(path.into()));
    }
    // A one-letter "scheme" is a Windows drive (`C:\pad.db`), not a URL.
    if let Some((scheme, _)) = database_url.split_once(':')
        && scheme.len() > 1
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return Err(format!("{scheme}: is not a database pad can use; give one of {DATABASE_SCHEMES}"));
    }
    Ok(Some(database_url.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_one_backend_or_are_refused() {
        assert_eq!(sqlite_path("postgres://h/db"), Ok(None));
        assert_eq!(sqlite_path("postgresql://h/db"), Ok(None));
        assert_eq!(sqlite_path("sqlite:///tmp/p.db"), Ok(Some("/tmp/p.db".into())));
        assert_eq!(sqlite_path("sqlite:p.db"), Ok(Some("p.db".into())));
        assert_eq!(sqlite_path("p.db"), Ok(Some("p.db".into())));
        assert_eq!(sqlite_path(r"C:\pad.db"), Ok(Some(r"C:\pad.db".into())));
        assert!(sqlite_path("mysql://x").unwrap_err().starts_with("mysql: is not a database"));
    }
}
