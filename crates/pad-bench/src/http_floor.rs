//! The drain floor behind HTTP (PostgreSQL): the drain floor's two
//! statements ([`crate::drain_floor`]) behind the least HTTP server that
//! answers pad's claim-next and complete routes with pad's request and
//! response shapes, so the very load that drains pad (the typed
//! `pad-client`, one complete carrying the next claim per item) drains it
//! too. A complete with `next` is the floor's complete, then its claim: two
//! autocommitted statements on a connection of a pool with one per worker.
//! No auth, no validation beyond parsing, no event order, no wake-ups, no
//! webhooks, no group of calls: what is left of pad's per-item cost once
//! its own work is taken away, on this machine, with HTTP in the loop
//! (docs/benchmarks.md, "What HTTP leaves of the floor").

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::routing::post;
use chrono::{DateTime, Utc};
use pad_core::api::{ClaimNextBody, ClaimNextResponse, CompleteBody, CompleteResponse, Grant};
use pad_core::lease::LastLease;
use pad_core::{Item, ItemRef, Lease, LeaseEnd, Priority, Status};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};

use crate::Result;
use crate::drain_floor::{CLAIM, COMPLETE};
use crate::floor::Served;

/// The floor's TTL, as its claim statement writes it.
const TTL_SECONDS: u32 = 3600;

/// The HTTP drain floor's routes over the drain floor's tables, with
/// `pool`'s connections, served on the runtime that calls it.
pub async fn start(pool: PgPool) -> Result<Served> {
    let app = axum::Router::new()
        .route("/api/v1/workspaces/{ws}/claim-next", post(claim_next))
        .route("/api/v1/workspaces/{ws}/items/{item}/complete", post(complete))
        .with_state(pool);
    Served::start(app).await
}

fn failed(_: sqlx::Error) -> StatusCode {
    StatusCode::INTERNAL_SERVER_ERROR
}

/// The floor's claim for `holder`: the answer pad gives, with at most one grant.
async fn claim(pool: &PgPool, holder: Option<String>) -> std::result::Result<ClaimNextResponse, StatusCode> {
    let holder = holder.unwrap_or_default();
    let row = sqlx::query(CLAIM).bind(&holder).fetch_optional(pool).await.map_err(failed)?;
    let grants = row
        .map(|row| {
            let acquired_at: DateTime<Utc> = row.get("lease_acquired_at");
            let lease = Lease {
                holder,
                session_id: None,
                epoch: row.get("lease_epoch"),
                lease_id: row.get("lease_id"),
                acquired_at,
                renewed_at: acquired_at,
                expires_at: row.get("lease_expires_at"),
                ttl_seconds: TTL_SECONDS,
                hold_until: None,
                user_id: 0,
            };
            Grant {
                item: item(&row, Status::Open, Some(lease.clone()), None),
                lease,
                previous_note: None,
                previous_holder: None,
            }
        })
        .into_iter()
        .collect();
    Ok(ClaimNextResponse::new(grants))
}

async fn claim_next(
    State(pool): State<PgPool>, UrlPath(_ws): UrlPath<String>, Json(body): Json<ClaimNextBody>,
) -> std::result::Result<Json<ClaimNextResponse>, StatusCode> {
    Ok(Json(claim(&pool, body.holder).await?))
}

async fn complete(
    State(pool): State<PgPool>, UrlPath((_ws, r)): UrlPath<(String, String)>, Json(body): Json<CompleteBody>,
) -> std::result::Result<Json<CompleteResponse>, StatusCode> {
    let item_ref: ItemRef = r.parse().map_err(|_| StatusCode::NOT_FOUND)?;
    let lease_id = body.lease_id.ok_or(StatusCode::BAD_REQUEST)?;
    let row = sqlx::query(COMPLETE)
        .bind(item_ref.number)
        .bind(lease_id)
        .fetch_optional(&pool)
        .await
        .map_err(failed)?
        .ok_or(StatusCode::CONFLICT)?;
    let ended_at: DateTime<Utc> = row.get("last_lease_ended_at");
    let last = LastLease {
        lease_id: row.get("last_lease_id"),
        epoch: row.get("lease_epoch"),
        holder: row.get("last_lease_holder"),
        session_id: None,
        // The floor keeps no acquisition time past the lease.
        acquired_at: ended_at,
        ended_at,
        ended: LeaseEnd::Completed,
        note: None,
        reason: None,
        broken_by: None,
    };
    let done = item(&row, Status::Done, None, Some(last));
    let next = match body.next {
        Some(next) => Some(claim(&pool, next.holder).await?),
        None => None,
    };
    Ok(Json(CompleteResponse { item_ref: r, item: done, next, next_error: None }))
}

/// The item as pad would show it, from the floor's narrow row.
fn item(row: &PgRow, status: Status, lease: Option<Lease>, last_lease: Option<LastLease>) -> Item {
    Item {
        item_ref: ItemRef { prefix: "TASK".into(), number: row.get("number") },
        kind: "task".into(),
        title: row.get("title"),
        body: String::new(),
        status,
        priority: Priority::Medium,
        labels: Vec::new(),
        parent: None,
        blocked_by: Vec::new(),
        blocked_by_open: Vec::new(),
        assignee: None,
        created_by: "floor@example.test".into(),
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
        deleted_at: None,
        comments_count: 0,
        lease,
        lease_note: None,
        not_before: None,
        failures: 0,
        retry_at: None,
        last_failure_note: None,
        last_failure_at: None,
        last_success_at: None,
        last_lease,
    }
}
