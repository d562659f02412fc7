//! Webhook subscriptions, their outbox and delivery log on SQLite
//! (docs/webhooks.md). Mirrors `pad-postgres/src/webhooks.rs` function by
//! function. Writes run on the one writer connection, so claims never race.

use pad_core::webhook::{self, CreateWebhook, DeliveryOutcome, Webhook, WebhookDelivery};
use pad_core::{EventKind, Workspace};
use pad_store::steps::Begin;
use pad_store::{Actor, AttemptResult, DueDelivery, StoreError, StoreResult, WebhookTarget};
use rusqlite::{Connection, Row};

use crate::SqliteStore;
use crate::events::event_from_row;
use crate::sql::{Col, Db, micros};

const WEBHOOK_SELECT: &str = "SELECT w.id, w.url, w.event_types, u.email, w.created_at,
        (SELECT COUNT(*) FROM webhook_outbox o WHERE o.webhook_id = w.id) AS pending
    FROM webhooks w LEFT JOIN users u ON u.id = w.created_by";

const DELIVERY_SELECT: &str = "SELECT id, event_id, event_type, attempt, status_code, error, duration_ms, outcome, at
    FROM webhook_deliveries";

/// Queues event `event` (just inserted by this transaction) for every
/// subscription of `ws` that wants `kind`: the outbox row commits or rolls
/// back with the event (docs/webhooks.md, "Outbox").
pub(crate) fn enqueue(conn: &Connection, ws: i64, event: i64, kind: EventKind, now: i64) -> StoreResult<()> {
    conn.exec(
        "INSERT INTO webhook_outbox (webhook_id, event_id, next_attempt_at)
         SELECT w.id, ?, ? FROM webhooks w
         WHERE w.workspace_id = ?
           AND (w.event_types = '[]' OR EXISTS (SELECT 1 FROM json_each(w.event_types) j WHERE j.value = ?))",
        (event, now, ws, kind.as_str()),
    )?;
    Ok(())
}

fn webhook_from_row(row: &Row<'_>) -> StoreResult<Webhook> {
    Ok(Webhook {
        id: row.col("id")?,
        url: row.col("url")?,
        events: row.json("event_types")?,
        created_by: row.col("email")?,
        created_at: row.ts("created_at")?,
        pending: row.col("pending")?,
    })
}

fn delivery_from_row(row: &Row<'_>) -> StoreResult<WebhookDelivery> {
    Ok(WebhookDelivery {
        id: row.col("id")?,
        event_id: row.col("event_id")?,
        event_type: row.col("event_type")?,
        attempt: u32::try_from(row.col::<i64>("attempt")?).unwrap_or(0),
        status_code: row.col::<Option<i64>>("status_code")?.and_then(|s| u16::try_from(s).ok()),
        error: row.col("error")?,
        duration_ms: u64::try_from(row.col::<i64>("duration_ms")?).unwrap_or(0),
        outcome: row.col::<String>("outcome")?.parse()?,
        at: row.ts("at")?,
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
    let tx = s.begin().await?;
    let conn = tx.conn();
    pad_store::check_webhook_cap(conn.scalar("SELECT COUNT(*) FROM webhooks WHERE workspace_id = ?", [ws.id])?)?;
    let id: i64 = conn.scalar(
        "INSERT INTO webhooks (workspace_id, url, event_types, secret, created_by, created_at)
         VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        (ws.id, &new.url, events, secret, actor.user_id, micros(tx.now)),
    )?;
    let created = conn.one(&format!("{WEBHOOK_SELECT} WHERE w.id = ?"), [id], webhook_from_row)?;
    tx.commit().await?;
    Ok(created)
}

pub(crate) async fn list(s: &SqliteStore, ws: &Workspace) -> StoreResult<Vec<Webhook>> {
    let sql = format!("{WEBHOOK_SELECT} WHERE w.workspace_id = ? ORDER BY w.id");
    let ws_id = ws.id;
    s.read(move |c| c.all(&sql, [ws_id], webhook_from_row)).await
}

pub(crate) async fn delete(s: &SqliteStore, ws: &Workspace, id: i64) -> StoreResult<()> {
    let tx = s.begin().await?;
    let gone = tx.conn().exec("DELETE FROM webhooks WHERE id = ? AND workspace_id = ?", (id, ws.id))?;
    if gone == 0 {
        return Err(StoreError::not_found(format!("webhook {id}")));
    }
    tx.commit().await
}

pub(crate) async fn target(s: &SqliteStore, ws: &Workspace, id: i64) -> StoreResult<WebhookTarget> {
    let ws_id = ws.id;
    s.read(move |c| {
        c.opt("SELECT id, url, secret FROM webhooks WHERE id = ? AND workspace_id = ?", (id, ws_id), |r| {
            Ok(WebhookTarget { id: r.col("id")?, url: r.col("url")?, secret: r.col("secret")? })
        })
    })
    .await?
    .ok_or_else(|| StoreError::not_found(format!("webhook {id}")))
}

pub(crate) async fn deliveries(
    s: &SqliteStore,
    ws: &Workspace,
    id: i64,
    limit: u32,
) -> StoreResult<Vec<WebhookDelivery>> {
    target(s, ws, id).await?;
    let sql = format!("{DELIVERY_SELECT} WHERE webhook_id = ? ORDER BY id DESC LIMIT ?");
    s.read(move |c| c.all(&sql, (id, i64::from(limit.clamp(1, 500))), delivery_from_row)).await
}

pub(crate) async fn claim(s: &SqliteStore, limit: u32, hold_seconds: i64) -> StoreResult<Vec<DueDelivery>> {
    // Asked every second: look on a reader first, so an idle outbox never
    // takes the write lock.
    let now = micros(s.clock.read());
    let any = s
        .read(move |c| c.opt("SELECT id FROM webhook_outbox WHERE next_attempt_at <= ? LIMIT 1", [now], |_| Ok(())))
        .await?;
    if any.is_none() {
        return Ok(Vec::new());
    }
    let tx = s.begin().await?;
    let conn = tx.conn();
    let now = micros(tx.now);
    let claimed: Vec<i64> = conn.all(
        "UPDATE webhook_outbox SET claim = lower(hex(randomblob(16))), claimed_until = ?1
         WHERE id IN (
            SELECT o.id FROM webhook_outbox o
            WHERE o.next_attempt_at <= ?2 AND (o.claimed_until IS NULL OR o.claimed_until <= ?2)
              AND NOT EXISTS (SELECT 1 FROM webhook_outbox p WHERE p.webhook_id = o.webhook_id AND p.event_id < o.event_id)
            ORDER BY o.next_attempt_at, o.id LIMIT ?3)
         RETURNING id",
        (now + hold_seconds * 1_000_000, now, i64::from(limit)),
        |r| r.col(0),
    )?;
    let mut due = Vec::with_capacity(claimed.len());
    for id in claimed {
        due.push(conn.one(
            "SELECT o.id AS outbox_id, o.claim, o.webhook_id, o.attempts, w.url, w.secret, ws.slug,
                    e.id, e.type, e.item_ref, u.email, e.at, e.data
             FROM webhook_outbox o JOIN webhooks w ON w.id = o.webhook_id JOIN workspaces ws ON ws.id = w.workspace_id
             JOIN events e ON e.id = o.event_id LEFT JOIN users u ON u.id = e.actor_id
             WHERE o.id = ?",
            [id],
            |row| {
                Ok(DueDelivery {
                    outbox_id: row.col("outbox_id")?,
                    claim: row.col("claim")?,
                    webhook_id: row.col("webhook_id")?,
                    workspace: row.col("slug")?,
                    url: row.col("url")?,
                    secret: row.col("secret")?,
                    attempts: u32::try_from(row.col::<i64>("attempts")?).unwrap_or(0),
                    event: event_from_row(row)?,
                })
            },
        )?);
    }
    tx.commit().await?;
    Ok(due)
}

pub(crate) async fn finish(s: &SqliteStore, due: &DueDelivery, result: &AttemptResult) -> StoreResult<()> {
    let attempt = due.attempts + 1;
    let (outcome, retry) = webhook::after_attempt(attempt, result.status_code);
    let tx = s.begin().await?;
    let conn = tx.conn();
    let now = micros(tx.now);
    match retry {
        None => {
            conn.exec("DELETE FROM webhook_outbox WHERE id = ? AND claim = ?", (due.outbox_id, &due.claim))?;
        }
        Some(delay) => {
            let micros_delay = i64::try_from(delay.as_micros()).unwrap_or(i64::MAX);
            conn.exec(
                "UPDATE webhook_outbox SET attempts = ?, next_attempt_at = ?, claim = NULL, claimed_until = NULL
                 WHERE id = ? AND claim = ?",
                (i64::from(attempt), now.saturating_add(micros_delay), due.outbox_id, &due.claim),
            )?;
        }
    }
    log(conn, due.webhook_id, Some(due.event.id), &due.event.kind, attempt, result, outcome, now)?;
    tx.commit().await
}

pub(crate) async fn log_test(
    s: &SqliteStore,
    ws: &Workspace,
    id: i64,
    result: &AttemptResult,
) -> StoreResult<WebhookDelivery> {
    let outcome =
        if webhook::accepted(result.status_code) { DeliveryOutcome::Delivered } else { DeliveryOutcome::Failed };
    let tx = s.begin().await?;
    let conn = tx.conn();
    let exists = conn.opt("SELECT id FROM webhooks WHERE id = ? AND workspace_id = ?", (id, ws.id), |_| Ok(()))?;
    if exists.is_none() {
        return Err(StoreError::not_found(format!("webhook {id}")));
    }
    log(conn, id, None, webhook::TEST_EVENT, 1, result, outcome, micros(tx.now))?;
    let logged =
        conn.one(&format!("{DELIVERY_SELECT} WHERE webhook_id = ? ORDER BY id DESC LIMIT 1"), [id], delivery_from_row)?;
    tx.commit().await?;
    Ok(logged)
}

/// One delivery log row (skipped if the subscription was deleted meanwhile),
/// keeping the newest `DELIVERIES_KEPT` of the subscription.
#[allow(clippy::too_many_arguments)]
fn log(
    conn: &Connection,
    webhook_id: i64,
    event_id: Option<i64>,
    event_type: &str,
    attempt: u32,
    result: &AttemptResult,
    outcome: DeliveryOutcome,
    now: i64,
) -> StoreResult<()> {
    conn.exec(
        "INSERT INTO webhook_deliveries (webhook_id, event_id, event_type, attempt, status_code, error, duration_ms,
                                         outcome, at)
         SELECT id, ?, ?, ?, ?, ?, ?, ?, ? FROM webhooks WHERE id = ?",
        rusqlite::params![
            event_id,
            event_type,
            i64::from(attempt),
            result.status_code.map(i64::from),
            result.error.as_deref(),
            i64::try_from(result.duration_ms).unwrap_or(i64::MAX),
            outcome.as_str(),
            now,
            webhook_id,
        ],
    )?;
    conn.exec(
        "DELETE FROM webhook_deliveries WHERE webhook_id = ?1 AND id <= (
            SELECT id FROM webhook_deliveries WHERE webhook_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
        (webhook_id, webhook::DELIVERIES_KEPT),
    )?;
    Ok(())
}
