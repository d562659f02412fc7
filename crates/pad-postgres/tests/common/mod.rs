//! Scratch databases for the PostgreSQL tests. `PAD_TEST_DATABASE_URL` names
//! a server (e.g. `postgres://postgres@127.0.0.1:5432/postgres`); each test
//! gets its own `pad_t_<unix secs>_<random>` database there, dropped when the
//! guard goes (also on panic). Databases left by killed runs are dropped by
//! the next run once they are an hour old.

#![allow(dead_code)]

use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};

pub const ENV: &str = "PAD_TEST_DATABASE_URL";

/// A database that lives as long as this guard.
pub struct ScratchDb {
    pub url: String,
    name: String,
    admin: PgConnectOptions,
}

fn unix_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs()
}

impl ScratchDb {
    /// `None` when no server is configured: the caller skips, loudly.
    pub async fn create() -> Option<ScratchDb> {
        let base = std::env::var(ENV).ok().filter(|u| !u.is_empty())?;
        let admin: PgConnectOptions = base.parse().unwrap_or_else(|e| panic!("{ENV}={base:?} is not a URL: {e}"));
        let mut conn = admin.connect().await.unwrap_or_else(|e| panic!("cannot reach {ENV}={base:?}: {e}"));
        drop_stale(&mut conn).await;
        let name = format!("pad_t_{}_{:016x}", unix_secs(), rand::random::<u64>());
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await.unwrap();
        let _ = conn.close().await;
        let url = admin.clone().database(&name).to_url_lossy().to_string();
        Some(ScratchDb { url, name, admin })
    }
}

async fn drop_stale(conn: &mut PgConnection) {
    let names: Vec<String> = sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 'pad\\_t\\_%'")
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    let hour_ago = unix_secs().saturating_sub(3600);
    for name in names {
        let born = name.split('_').nth(2).and_then(|s| s.parse::<u64>().ok());
        if born.is_some_and(|b| b < hour_ago) {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                .execute(&mut *conn)
                .await;
        }
    }
}

impl Drop for ScratchDb {
    /// Drop runs inside the test's runtime, which cannot be blocked on, so the
    /// DROP DATABASE runs on a thread of its own. `FORCE` ends the pool's
    /// connections, which may still be closing.
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let mut conn = admin.connect().await?;
                sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                    .execute(&mut conn)
                    .await?;
                conn.close().await
            })
        });
        if let Ok(Err(e)) = done.join() {
            eprintln!("could not drop scratch database {}: {e}", self.name);
        }
    }
}
