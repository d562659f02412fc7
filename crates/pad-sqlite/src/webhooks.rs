//! Webhook subscriptions, their outbox and delivery log on SQLite
//! (docs/webhooks.md). Mirrors `pad-postgres/src/webhooks.rs` function by
//! function. Writes run on the one writer connection, so claims never race.

use pad_core::webhook::{self, CreateWebhook, DeliveryOutcome, Webhook, WebhookDelivery};
use pad_core::{Event, EventKind, Workspace};
use pad_store::{Actor, AttemptResult, DueDelivery, StoreError, StoreResult, WebhookTarget};
use sqlx::Row;
use sqlx::sqlite::{SqliteConnection, SqliteRow};

use crate::rows::{micros, ts};
use crate::{SqliteStore, db};

const WEBHOOK_SELECT: &str = "SELECT w.id, w.url, w.event_types, u.email, w.created_at,
        (SELECT COUNT(*) FROM webhook_outbox o WHERE o.webhook_id = w.id) AS pending
    FROM webhooks w LEFT JOIN users u ON u.id = w.created_by";

const DELIVERY_SELECT: &str = "SELECT id, event_id, event_type, attempt, status_code, error, duration_ms, outcome, at
    FROM webhook_deliveries";

/// Queues the event just inserted by this transaction for every subscription
/// of `ws` that wants `kind`: the outbox row commits or rolls back with the
/// event (docs/webhooks.md, "Outbox"). Writes are serial, so the event is
/// the table's newest row.
pub(crate) async fn enqueue(conn: &mut SqliteConnection, ws: i64, kind: EventKind, now: i64) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO webhook_outbox (webhook_id, event_id, next_attempt_at)
         SELECT w.id, (SELECT MAX(id) FROM events), ? FROM webhooks w
         WHERE w.workspace_id = ?
           AND (w.event_types = '[]' OR EXISTS (SELECT 1 FROM json_each(w.event_types) j WHERE j.value = ?))",
    )
    .bind(now)
    .bind(ws)
    .bind(kind.as_str())
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(())
}

fn webhook_from_row(row: &SqliteRow) -> StoreResult<Webhook> {
    let types: String = row.get("event_types");
    Ok(Webhook {
        id: row.get("id"),
        url: row.get("url"),
        events: serde_json::from_str(&types).map_err(|e| StoreError::Internal(format!("webhook event types: {e}")))?,
        created_by: row.get("email"),
        created_at: ts(row.get("created_at"))?,
        pending: row.get("pending"),
    })
}

fn delivery_from_row(row: &SqliteRow) -> StoreResult<WebhookDelivery> {
    let outcome: String = row.get("outcome");
    Ok(WebhookDelivery {
        id: row.get("id"),
        event_id: row.get("event_id"),
        event_type: row.get("event_type"),
        attempt: u32::try_from(row.get::<i64, _>("attempt")).unwrap_or(0),
        status_code: row.get::<Option<i64>, _>("status_code").and_then(|s| u16::try_from(s).ok()),
        error: row.get("error"),
        duration_ms: u64::try_from(row.get::<i64, _>("duration_ms")).unwrap_or(0),
        outcome: outcome.parse()?,
        at: ts(row.get("at"))?,
    })
}

pub(crate) async fn create(
    s: &SqliteStore,
    ws: &Workspace,
    actor: Actor,
    new: &CreateWebhook,
    secret: &str,
) -> StoreResult<Webhook> {
    webhook::validate_url(&new.url)?;
    let events = serde_json::to_string(&webhook::normalize_events(&new.events))
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    let crate::Tx { conn: mut tx, now } = pad_store::steps::Begin::begin(s).await?;
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM webhooks WHERE workspace_id = ?")
        .bind(ws.id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
    pad_store::check_webhook_cap(n)?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO webhooks (workspace_id, url, event_types, secret, created_by, created_at)
         VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
    )
    .bind(ws.id)
    .bind(&new.url)
    .bind(events)
    .bind(secret)
    .bind(actor.user_id)
    .bind(micros(now))
    .fetch_one(&mut *tx)
    .await
    .map_err(db)?;
    let sql = format!("{WEBHOOK_SELECT} WHERE w.id = ?");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&mut *tx).await.map_err(db)?;
    tx.commit().await.map_err(db)?;
    webhook_from_row(&row)
}

pub(crate) async fn list(s: &SqliteStore, ws: &Workspace) -> StoreResult<Vec<Webhook>> {
    let sql = format!("{WEBHOOK_SELECT} WHERE w.workspace_id = ? ORDER BY w.id");
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(ws.id).fetch_all(&s.reader).await.map_err(db)?;
    rows.iter().map(webhook_from_row).collect()
}

pub(crate) async fn delete(s: &SqliteStore, ws: &Workspace, id: i64) -> StoreResult<()> {
    let crate::Tx { conn: mut tx, now: _ } = pad_store::steps::Begin::begin(s).await?;
    let gone = sqlx::query("DELETE FROM webhooks WHERE id = ? AND workspace_id = ?")
        .bind(id)
        .bind(ws.id)
        .execute(&mut *tx)
        .await
        .map_err(db)?
        .rows_affected();
    if gone == 0 {
        return Err(StoreError::not_found(format!("webhook {id}")));
    }
    tx.commit().await.map_err(db)
}

pub(crate) async fn target(s: &SqliteStore, ws: &Workspace, id: i64) -> StoreResult<WebhookTarget> {
    let row = sqlx::query("SELECT id, url, secret FROM webhooks WHERE id = ? AND workspace_id = ?")
        .bind(id)
        .bind(ws.id)
        .fetch_optional(&s.reader)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::not_found(format!("webhook {id}")))?;
    Ok(WebhookTarget { id: row.get("id"), url: row.get("url"), secret: row.get("secret") })
}

pub(crate) async fn deliveries(
    s: &SqliteStore,
    ws: &Workspace,
    id: i64,
    limit: u32,
) -> StoreResult<Vec<WebhookDelivery>> {
    target(s, ws, id).await?;
    let sql = format!("{DELIVERY_SELECT} WHERE webhook_id = ? ORDER BY id DESC LIMIT ?");
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(i64::from(limit.clamp(1, 500)))
        .fetch_all(&s.reader)
        .await
        .map_err(db)?;
    rows.iter().map(delivery_from_row).collect()
}

pub(crate) async fn claim(s: &SqliteStore, limit: u32, hold_seconds: i64) -> StoreResult<Vec<DueDelivery>> {
    // Asked every second: look on a reader first, so an idle outbox never
    // takes the write lock.
    let any: Option<i64> = sqlx::query_scalar("SELECT id FROM webhook_outbox WHERE next_attempt_at <= ? LIMIT 1")
        .bind(micros(s.clock.read()))
        .fetch_optional(&s.reader)
        .await
        .map_err(db)?;
    if any.is_none() {
        return Ok(Vec::new());
    }
    let crate::Tx { conn: mut tx, now } = pad_store::steps::Begin::begin(s).await?;
    let now = micros(now);
    let claimed = sqlx::query(
        "UPDATE webhook_outbox SET claim = lower(hex(randomblob(16))), claimed_until = ?
         WHERE id IN (
            SELECT o.id FROM webhook_outbox o
            WHERE o.next_attempt_at <= ? AND (o.claimed_until IS NULL OR o.claimed_until <= ?)
              AND NOT EXISTS (SELECT 1 FROM webhook_outbox p WHERE p.webhook_id = o.webhook_id AND p.event_id < o.event_id)
            ORDER BY o.next_attempt_at, o.id LIMIT ?)
         RETURNING id",
    )
    .bind(now + hold_seconds * 1_000_000)
    .bind(now)
    .bind(now)
    .bind(i64::from(limit))
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    let mut due = Vec::with_capacity(claimed.len());
    for c in &claimed {
        let row = sqlx::query(
            "SELECT o.id, o.claim, o.webhook_id, o.attempts, w.url, w.secret, ws.slug,
                    e.id AS event_id, e.type, e.item_ref, u.email, e.at, e.data
             FROM webhook_outbox o JOIN webhooks w ON w.id = o.webhook_id JOIN workspaces ws ON ws.id = w.workspace_id
             JOIN events e ON e.id = o.event_id LEFT JOIN users u ON u.id = e.actor_id
             WHERE o.id = ?",
        )
        .bind(c.get::<i64, _>("id"))
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        due.push(DueDelivery {
            outbox_id: row.get("id"),
            claim: row.get("claim"),
            webhook_id: row.get("webhook_id"),
            workspace: row.get("slug"),
            url: row.get("url"),
            secret: row.get("secret"),
            attempts: u32::try_from(row.get::<i64, _>("attempts")).unwrap_or(0),
            event: Event {
                id: row.get("event_id"),
                kind: row.get("type"),
                item_ref: row.get("item_ref"),
                actor: row.get("email"),
                at: ts(row.get("at"))?,
                data: serde_json::from_str(row.get("data")).map_err(|e| StoreError::Internal(e.to_string()))?,
            },
        });
    }
    tx.commit().await.map_err(db)?;
    Ok(due)
}

pub(crate) async fn finish(s: &SqliteStore, due: &DueDelivery, result: &AttemptResult) -> StoreResult<()> {
    let attempt = due.attempts + 1;
    let (outcome, retry) = webhook::after_attempt(attempt, result.status_code);
    let crate::Tx { conn: mut tx, now } = pad_store::steps::Begin::begin(s).await?;
    let now = micros(now);
    match retry {
        None => {
            sqlx::query("DELETE FROM webhook_outbox WHERE id = ? AND claim = ?")
                .bind(due.outbox_id)
                .bind(&due.claim)
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        Some(delay) => {
            let micros_delay = i64::try_from(delay.as_micros()).unwrap_or(i64::MAX);
            sqlx::query(
                "UPDATE webhook_outbox SET attempts = ?, next_attempt_at = ?, claim = NULL, claimed_until = NULL
                 WHERE id = ? AND claim = ?",
            )
            .bind(i64::from(attempt))
            .bind(now.saturating_add(micros_delay))
            .bind(due.outbox_id)
            .bind(&due.claim)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        }
    }
    log(&mut tx, due.webhook_id, Some(due.event.id), &due.event.kind, attempt, result, outcome, now).await?;
    tx.commit().await.map_err(db)
}

pub(crate) async fn log_test(
    s: &SqliteStore,
    ws: &Workspace,
    id: i64,
    result: &AttemptResult,
) -> StoreResult<WebhookDelivery> {
    let outcome =
        if webhook::accepted(result.status_code) { DeliveryOutcome::Delivered } else { DeliveryOutcome::Failed };
    let crate::Tx { conn: mut tx, now } = pad_store::steps::Begin::begin(s).await?;
    let exists: Option<i64> = sqlx::query_scalar("SELECT id FROM webhooks WHERE id = ? AND workspace_id = ?")
        .bind(id)
        .bind(ws.id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
    if exists.is_none() {
        return Err(StoreError::not_found(format!("webhook {id}")));
    }
    log(&mut tx, id, None, webhook::TEST_EVENT, 1, result, outcome, micros(now)).await?;
    let sql = format!("{DELIVERY_SELECT} WHERE webhook_id = ? ORDER BY id DESC LIMIT 1");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&mut *tx).await.map_err(db)?;
    tx.commit().await.map_err(db)?;
    delivery_from_row(&row)
}

/// One delivery log row (skipped if the subscription was deleted meanwhile),
/// keeping the newest `DELIVERIES_KEPT` of the subscription.
#[allow(clippy::too_many_arguments)]
async fn log(
    conn: &mut SqliteConnection,
    webhook_id: i64,
    event_id: Option<i64>,
    event_type: &str,
    attempt: u32,
    result: &AttemptResult,
    outcome: DeliveryOutcome,
    now: i64,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO webhook_deliveries (webhook_id, event_id, event_type, attempt, status_code, error, duration_ms, outcome, at)
         SELECT id, ?, ?, ?, ?, ?, ?, ?, ? FROM webhooks WHERE id = ?",
    )
    .bind(event_id)
    .bind(event_type)
    .bind(i64::from(attempt))
    .bind(result.status_code.map(i64::from))
    .bind(result.error.as_deref())
    .bind(i64::try_from(result.duration_ms).unwrap_or(i64::MAX))
    .bind(outcome.as_str())
    .bind(now)
    .bind(webhook_id)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    sqlx::query(
        "DELETE FROM webhook_deliveries WHERE webhook_id = ? AND id <= (
            SELECT id FROM webhook_deliveries WHERE webhook_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
    )
    .bind(webhook_id)
    .bind(webhook_id)
    .bind(webhook::DELIVERIES_KEPT)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(())
}
