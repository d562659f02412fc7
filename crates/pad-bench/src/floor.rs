//! The floor: the least an HTTP lease server on SQLite can do, to measure
//! how close pad gets to the metal. One axum router, one rusqlite connection
//! behind a mutex (WAL, `synchronous=NORMAL`, as pad's store), one table.
//! A claim is one conditional `UPDATE … RETURNING`, a release one `UPDATE`.
//! No auth, no events, no history, no validation beyond parsing.
//!
//! It answers pad's claim and release routes with pad's request and response
//! shapes, so the very load generator that drives pad's HTTP cycle (the
//! typed `pad-client`) drives it too: the only difference measured is the
//! server.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::routing::post;
use chrono::{DateTime, Utc};
use pad_client::Url;
use pad_core::Lease;
use pad_core::api::{ClaimBody, ClaimResponse, ReleaseBody, ReleaseResponse};
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::Result;

/// A TTL the body leaves out; pad's default.
const DEFAULT_TTL: i64 = 900;

type Db = Arc<Mutex<Connection>>;

/// A router served on `127.0.0.1:0` by a task of the runtime that started
/// it, until [`finish`](Served::finish): the floors' servers.
pub struct Served {
    /// Base URL for `pad_client::Client` (the floors accept any token).
    pub url: Url,
    server: JoinHandle<std::io::Result<()>>,
    stop: oneshot::Sender<()>,
}

impl Served {
    pub async fn start(app: axum::Router) -> Result<Served> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = Url::parse(&format!("http://{}", listener.local_addr()?))?;
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
        });
        Ok(Served { url, server, stop })
    }

    pub async fn finish(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), self.server).await;
    }
}

/// A running floor server on `127.0.0.1:0` over a temp SQLite file.
pub struct Floor {
    served: Served,
    _dir: tempfile::TempDir,
}

impl Floor {
    /// Starts the server with items `TASK-1` to `TASK-<items>`, all free.
    pub async fn start(items: i64) -> Result<Floor> {
        let dir = tempfile::Builder::new().prefix("pad-bench-floor-").tempdir()?;
        let conn = open(&dir.path().join("floor.db"), items)?;
        let app = axum::Router::new()
            .route("/api/v1/workspaces/{ws}/items/{item}/claim", post(claim))
            .route("/api/v1/workspaces/{ws}/items/{item}/release", post(release))
            .with_state(Arc::new(Mutex::new(conn)));
        Ok(Floor { served: Served::start(app).await?, _dir: dir })
    }

    /// Base URL for `pad_client::Client` (any token is accepted).
    pub fn url(&self) -> &Url {
        &self.served.url
    }

    pub async fn finish(self) {
        self.served.finish().await;
    }
}

fn open(path: &Path, items: i64) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.execute_batch(
        "CREATE TABLE items (
            number INTEGER PRIMARY KEY,
            lease_holder TEXT,
            lease_epoch INTEGER NOT NULL DEFAULT 0,
            lease_acquired_at INTEGER,
            lease_expires_at INTEGER,
            lease_ttl_seconds INTEGER
        )",
    )?;
    conn.execute(
        "WITH RECURSIVE seq(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM seq WHERE x < ?1)
         INSERT INTO items (number) SELECT x FROM seq",
        [items],
    )?;
    Ok(conn)
}

/// `TASK-7` → 7; anything else is no item of the floor's.
fn number(item: &str) -> Option<i64> {
    item.strip_prefix("TASK-")?.parse().ok()
}

fn now_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

fn time(micros: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(micros).unwrap_or_default()
}

async fn claim(
    State(db): State<Db>, UrlPath((_ws, item)): UrlPath<(String, String)>, Json(body): Json<ClaimBody>,
) -> Result<Json<ClaimResponse>, StatusCode> {
    let n = number(&item).ok_or(StatusCode::NOT_FOUND)?;
    let holder = body.holder.unwrap_or_default();
    let ttl = body.ttl_seconds.map_or(DEFAULT_TTL, |t| t.seconds());
    let now = now_micros();
    let epoch = {
        let conn = db.lock().map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
        let mut stmt = conn
            .prepare_cached(
                "UPDATE items SET lease_holder = ?1, lease_epoch = lease_epoch + 1, lease_acquired_at = ?2,
                        lease_expires_at = ?2 + ?3 * 1000000, lease_ttl_seconds = ?3
                 WHERE number = ?4 AND (lease_holder IS NULL OR lease_expires_at <= ?2)
                 RETURNING lease_epoch",
            )
            .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
        stmt.query_row(params![holder, now, ttl, n], |row| row.get::<_, i64>(0))
            .optional()
            .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?
    };
    let epoch = epoch.ok_or(StatusCode::CONFLICT)?;
    let lease = Lease {
        holder,
        session_id: None,
        epoch,
        // The floor has one item space and no handles; the epoch names the grant.
        lease_id: epoch,
        acquired_at: time(now),
        renewed_at: time(now),
        expires_at: time(now + ttl * 1_000_000),
        ttl_seconds: u32::try_from(ttl).unwrap_or(0),
        hold_until: None,
        user_id: 0,
    };
    Ok(Json(ClaimResponse { item_ref: item, lease, refreshed: false, previous_note: None, previous_holder: None }))
}

async fn release(
    State(db): State<Db>, UrlPath((_ws, item)): UrlPath<(String, String)>, Json(body): Json<ReleaseBody>,
) -> Result<Json<ReleaseResponse>, StatusCode> {
    let n = number(&item).ok_or(StatusCode::NOT_FOUND)?;
    let holder = body.holder.unwrap_or_default();
    let changed = {
        let conn = db.lock().map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
        let mut stmt = conn
            .prepare_cached(
                "UPDATE items SET lease_holder = NULL, lease_acquired_at = NULL, lease_expires_at = NULL,
                        lease_ttl_seconds = NULL
                 WHERE number = ?1 AND lease_holder = ?2",
            )
            .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
        stmt.execute(params![n, holder]).map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?
    };
    let released = changed == 1;
    let reason = if released { "released" } else { "no live lease" };
    Ok(Json(ReleaseResponse { item_ref: item, released, reason: reason.into(), next: None, next_error: None }))
}
