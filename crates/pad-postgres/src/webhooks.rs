//! Webhook subscriptions, their outbox and delivery log on PostgreSQL
//! (docs/webhooks.md). Mirrors `pad-sqlite/src/webhooks.rs` function by
//! function, but for the outbox insert, which here is part of each event's
//! own statement (`enqueue_events!` in lib.rs). Many instances share the outbox: a claim is one statement that
//! locks the rows it takes with `FOR UPDATE SKIP LOCKED` and marks them
//! claimed until a deadline, so exactly one instance delivers each attempt
//! and a crashed instance's claim passes on when it runs out.

use async_trait::async_trait;
use pad_core::webhook::{self, CreateWebhook, DeliveryOutcome, Webhook, WebhookDelivery};
use pad_core::{Event, Workspace};
use pad_store::{Actor, AttemptResult, DueDelivery, StoreError, StoreResult, WebhookOps, WebhookTarget};
use sqlx::Row;
use sqlx::postgres::{PgConnection, PgRow};

use crate::{PgStore, db};

const WEBHOOK_SELECT: &str = "SELECT w.id, w.url, w.event_types, u.email, w.created_at, w.paused_at, w.dropped,
        (SELECT COUNT(*) FROM webhook_outbox o WHERE o.webhook_id = w.id) AS pending
    FROM webhooks w LEFT JOIN users u ON u.id = w.created_by";

const DELIVERY_SELECT: &str = "SELECT id, event_id, event_type, attempt, status_code, error, duration_ms, outcome, at
    FROM webhook_deliveries";

/// Each active subscription's head that is due and unclaimed, with its slot
/// in its account's share (docs/webhooks.md, "Isolation"): its rank among
/// the account's due heads, oldest first, after the account's heads under a
/// running claim; a head is claimable while its slot is within the cap.
/// Heads are read from each subscription through the `(webhook_id,
/// event_id)` index, so the rows behind a head are never read. A
/// subscription's account is the one its workspace's creation was charged
/// to (`workspaces.charged_to`), whoever the members are now; a workspace
/// without one (it had no members when pad began recording it) is an
/// account of its own. `$also`: more conditions on a head `d`.
macro_rules! ranked_heads {
    ($also:literal) => {
        concat!(
            "subs AS MATERIALIZED (
        SELECT o.id, o.event_id, o.next_attempt_at, o.claimed_until, w.paused_at,
            COALESCE((SELECT ws.charged_to FROM workspaces ws WHERE ws.id = w.workspace_id),
                -w.workspace_id) AS account
        FROM webhooks w
        CROSS JOIN LATERAL (
            SELECT h.id FROM webhook_outbox h WHERE h.webhook_id = w.id ORDER BY h.event_id LIMIT 1) head
        JOIN webhook_outbox o ON o.id = head.id),
    busy AS (SELECT account, count(*) AS n FROM subs WHERE claimed_until > clock_timestamp() GROUP BY account),
    ranked AS (
        SELECT d.id, d.next_attempt_at,
            row_number() OVER (PARTITION BY d.account ORDER BY d.next_attempt_at, d.id) + COALESCE(b.n, 0) AS slot
        FROM subs d LEFT JOIN busy b ON b.account = d.account
        WHERE d.paused_at IS NULL
          AND d.next_attempt_at <= clock_timestamp()
          AND (d.claimed_until IS NULL OR d.claimed_until <= clock_timestamp())",
            $also,
            ")"
        )
    };
}

/// Claims the due heads of subscriptions ([`ranked_heads!`]): only the
/// oldest pending event of an active subscription is eligible (in-order
/// delivery), only while its account has a slot, and only below the event
/// visibility horizon ([`event_horizon!`], as `EVENTS_AFTER`): an event
/// whose transaction may still commit with a smaller id would otherwise be
/// overtaken by a later one. A head another instance locks is skipped, and
/// one it claimed or finished meanwhile is checked again once locked. $1
/// limit, $2 hold seconds, $3 the foreign transactions
/// (`events::foreign_xids`, read before), $4 the per-account cap.
const CLAIM: &str = concat!(
    "WITH ",
    event_horizon!("$3"),
    ",
    ",
    ranked_heads!(
        "
          AND d.event_id < (SELECT below FROM horizon)"
    ),
    ",
    due AS (
        SELECT o.id FROM ranked r JOIN webhook_outbox o ON o.id = r.id
        WHERE r.slot <= $4
          AND o.next_attempt_at <= clock_timestamp()
          AND (o.claimed_until IS NULL OR o.claimed_until <= clock_timestamp())
        ORDER BY r.next_attempt_at, r.id
        LIMIT $1
        FOR UPDATE OF o SKIP LOCKED
    )
    UPDATE webhook_outbox o SET claim = md5(random()::text || clock_timestamp()::text || o.id::text),
        claimed_until = clock_timestamp() + make_interval(secs => $2)
    FROM due WHERE o.id = due.id
    RETURNING o.id"
);

/// Whether any active subscription's head is due and its account has a
/// slot: the claim's question without its horizon and locks. $1 the
/// per-account cap.
const ANY_DUE: &str = concat!("WITH ", ranked_heads!(""), " SELECT EXISTS (SELECT 1 FROM ranked WHERE slot <= $1)");

/// Drops, per subscription, the queued rows older than the newest $1, never
/// one under a running claim, counts them on the subscription, and answers
/// how many (docs/webhooks.md, "A full queue"). Two instances trimming at
/// once delete each row once: the second waits for the first's row locks.
const TRIM: &str = "WITH cut AS (
        SELECT w.id, (SELECT o.event_id FROM webhook_outbox o WHERE o.webhook_id = w.id
            ORDER BY o.event_id DESC OFFSET $1 LIMIT 1) AS upto
        FROM webhooks w
    ),
    gone AS (
        DELETE FROM webhook_outbox o USING cut
        WHERE cut.upto IS NOT NULL AND o.webhook_id = cut.id AND o.event_id <= cut.upto
          AND (o.claimed_until IS NULL OR o.claimed_until <= clock_timestamp())
        RETURNING o.webhook_id
    ),
    counted AS (SELECT webhook_id, count(*) AS n FROM gone GROUP BY webhook_id),
    noted AS (
        UPDATE webhooks w SET dropped = w.dropped + counted.n FROM counted
        WHERE w.id = counted.webhook_id RETURNING counted.n
    )
    SELECT COALESCE(sum(n), 0)::bigint FROM noted";

fn webhook_from_row(row: &PgRow) -> StoreResult<Webhook> {
    let types: Vec<String> = row.get("event_types");
    let paused_at: Option<pad_core::Timestamp> = row.get("paused_at");
    Ok(Webhook {
        id: row.get("id"),
        url: row.get("url"),
        events: types.iter().map(|t| t.parse()).collect::<Result<_, _>>()?,
        created_by: row.get("email"),
        created_at: row.get("created_at"),
        pending: row.get("pending"),
        paused: paused_at.is_some(),
        paused_at,
        dropped: row.get("dropped"),
    })
}

fn delivery_from_row(row: &PgRow) -> StoreResult<WebhookDelivery> {
    let outcome: String = row.get("outcome");
    Ok(WebhookDelivery {
        id: row.get("id"),
        event_id: row.get("event_id"),
        event_type: row.get("event_type"),
        attempt: u32::try_from(row.get::<i32, _>("attempt")).unwrap_or(0),
        status_code: row.get::<Option<i32>, _>("status_code").and_then(|s| u16::try_from(s).ok()),
        error: row.get("error"),
        duration_ms: u64::try_from(row.get::<i64, _>("duration_ms")).unwrap_or(0),
        outcome: outcome.parse()?,
        at: row.get("at"),
    })
}

#[async_trait]
impl WebhookOps for PgStore {
    async fn create_webhook(
        &self, ws: &Workspace, actor: Actor, new: &CreateWebhook, secret: &str,
    ) -> StoreResult<Webhook> {
        webhook::validate_url(&new.url)?;
        let events: Vec<&str> = webhook::normalize_events(&new.events).iter().map(|k| k.as_str()).collect();
        let mut tx = pad_store::steps::Begin::begin(self).await?.conn;
        // Serializes creates per workspace, so the cap holds under concurrency.
        sqlx::query("SELECT id FROM workspaces WHERE id = $1 FOR UPDATE")
            .bind(ws.id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM webhooks WHERE workspace_id = $1")
            .bind(ws.id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        pad_store::check_webhook_cap(n)?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO webhooks (workspace_id, url, event_types, secret, created_by, created_at)
             VALUES ($1, $2, $3, $4, $5, clock_timestamp()) RETURNING id",
        )
        .bind(ws.id)
        .bind(&new.url)
        .bind(events)
        .bind(secret)
        .bind(actor.user_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        let sql = format!("{WEBHOOK_SELECT} WHERE w.id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&mut *tx).await.map_err(db)?;
        tx.commit().await.map_err(db)?;
        webhook_from_row(&row)
    }

    async fn list_webhooks(&self, ws: &Workspace) -> StoreResult<Vec<Webhook>> {
        let sql = format!("{WEBHOOK_SELECT} WHERE w.workspace_id = $1 ORDER BY w.id");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(ws.id).fetch_all(&self.pool).await.map_err(db)?;
        rows.iter().map(webhook_from_row).collect()
    }

    async fn delete_webhook(&self, ws: &Workspace, id: i64) -> StoreResult<()> {
        let gone = sqlx::query("DELETE FROM webhooks WHERE id = $1 AND workspace_id = $2")
            .bind(id)
            .bind(ws.id)
            .execute(&self.pool)
            .await
            .map_err(db)?
            .rows_affected();
        if gone == 0 {
            return Err(StoreError::not_found(format!("webhook {id}")));
        }
        Ok(())
    }

    /// Clears the pause (docs/webhooks.md, "Paused subscriptions").
    async fn resume_webhook(&self, ws: &Workspace, id: i64) -> StoreResult<Webhook> {
        // Two statements: a data-modifying CTE's neighbours read the row as it
        // was before the update.
        let found: Option<i64> =
            sqlx::query_scalar("UPDATE webhooks SET paused_at = NULL WHERE id = $1 AND workspace_id = $2 RETURNING id")
                .bind(id)
                .bind(ws.id)
                .fetch_optional(&self.pool)
                .await
                .map_err(db)?;
        if found.is_none() {
            return Err(StoreError::not_found(format!("webhook {id}")));
        }
        let sql = format!("{WEBHOOK_SELECT} WHERE w.id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&self.pool).await.map_err(db)?;
        webhook_from_row(&row)
    }

    async fn trim_webhook_queues(&self, keep: i64) -> StoreResult<u64> {
        let n: i64 = sqlx::query_scalar(TRIM).bind(keep).fetch_one(&self.pool).await.map_err(db)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn webhook_target(&self, ws: &Workspace, id: i64) -> StoreResult<WebhookTarget> {
        let row = sqlx::query("SELECT id, url, secret FROM webhooks WHERE id = $1 AND workspace_id = $2")
            .bind(id)
            .bind(ws.id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .ok_or_else(|| StoreError::not_found(format!("webhook {id}")))?;
        Ok(WebhookTarget { id: row.get("id"), url: row.get("url"), secret: row.get("secret") })
    }

    async fn webhook_deliveries(&self, ws: &Workspace, id: i64, limit: u32) -> StoreResult<Vec<WebhookDelivery>> {
        self.webhook_target(ws, id).await?;
        let sql = format!("{DELIVERY_SELECT} WHERE webhook_id = $1 ORDER BY id DESC LIMIT $2");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .bind(i64::from(limit.clamp(1, 500)))
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        rows.iter().map(delivery_from_row).collect()
    }

    async fn claim_webhook_deliveries(&self, limit: u32, hold_seconds: i64) -> StoreResult<Vec<DueDelivery>> {
        // Asked every second by every instance: skip the horizon and the locks
        // while no head is due (a queue behind a waiting head is not).
        // Nor while only heads of accounts at their cap are: they are left
        // unclaimed, for a look after one of theirs ends.
        let cap = i64::from(DueDelivery::IN_FLIGHT_PER_ACCOUNT);
        let any: bool = sqlx::query_scalar(ANY_DUE).bind(cap).fetch_one(&self.pool).await.map_err(db)?;
        if !any {
            return Ok(Vec::new());
        }
        let foreign = crate::events::foreign_xids(&self.pool).await?;
        let ids: Vec<i64> = sqlx::query_scalar(CLAIM)
            .bind(i64::from(limit))
            .bind(hold_seconds as f64)
            .bind(foreign)
            .bind(cap)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(
            "SELECT o.id, o.claim, o.webhook_id, o.attempts, w.url, w.secret, ws.slug,
                    e.id AS event_id, e.type, e.item_ref, u.email, e.at, e.data
             FROM webhook_outbox o JOIN webhooks w ON w.id = o.webhook_id JOIN workspaces ws ON ws.id = w.workspace_id
             JOIN events e ON e.id = o.event_id LEFT JOIN users u ON u.id = e.actor_id
             WHERE o.id = ANY($1) ORDER BY o.next_attempt_at, o.id",
        )
        .bind(&ids)
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|row| {
                Ok(DueDelivery {
                    outbox_id: row.get("id"),
                    claim: row.get("claim"),
                    webhook_id: row.get("webhook_id"),
                    workspace: row.get("slug"),
                    url: row.get("url"),
                    secret: row.get("secret"),
                    attempts: u32::try_from(row.get::<i32, _>("attempts")).unwrap_or(0),
                    event: Event {
                        id: row.get("event_id"),
                        kind: pad_store::rows::event_kind(row.get("type"))?,
                        item_ref: row.get("item_ref"),
                        actor: row.get("email"),
                        at: row.get("at"),
                        data: row.get("data"),
                    },
                })
            })
            .collect()
    }

    async fn finish_webhook_delivery(&self, due: &DueDelivery, result: &AttemptResult) -> StoreResult<()> {
        // A delivered row leaves an entry at its queue's head (`vacuum.rs`).
        self.vacuum.count();
        let attempt = due.attempts + 1;
        let (outcome, retry) = webhook::after_attempt(attempt, result.status_code);
        let mut tx = pad_store::steps::Begin::begin(self).await?.conn;
        match retry {
            None => {
                let ended = sqlx::query("DELETE FROM webhook_outbox WHERE id = $1 AND claim = $2")
                    .bind(due.outbox_id)
                    .bind(&due.claim)
                    .execute(&mut *tx)
                    .await
                    .map_err(db)?
                    .rows_affected();
                // Given up while the claim was still ours: the subscription
                // pauses (docs/webhooks.md, "Paused subscriptions").
                if ended == 1 && outcome == DeliveryOutcome::Failed {
                    sqlx::query(
                        "UPDATE webhooks SET paused_at = clock_timestamp() WHERE id = $1 AND paused_at IS NULL",
                    )
                    .bind(due.webhook_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(db)?;
                }
            }
            Some(delay) => {
                sqlx::query(
                    "UPDATE webhook_outbox SET attempts = $1, next_attempt_at = clock_timestamp() + make_interval(secs => $2),
                            claim = NULL, claimed_until = NULL
                     WHERE id = $3 AND claim = $4",
                )
                .bind(i32::try_from(attempt).unwrap_or(i32::MAX))
                .bind(delay.as_secs_f64())
                .bind(due.outbox_id)
                .bind(&due.claim)
                .execute(&mut *tx)
                .await
                .map_err(db)?;
            }
        }
        log(&mut tx, due.webhook_id, Some(due.event.id), due.event.kind.as_str(), attempt, result, outcome).await?;
        tx.commit().await.map_err(db)
    }

    async fn log_webhook_test(&self, ws: &Workspace, id: i64, result: &AttemptResult) -> StoreResult<WebhookDelivery> {
        let outcome =
            if webhook::accepted(result.status_code) { DeliveryOutcome::Delivered } else { DeliveryOutcome::Failed };
        let mut tx = pad_store::steps::Begin::begin(self).await?.conn;
        let exists: Option<i64> = sqlx::query_scalar("SELECT id FROM webhooks WHERE id = $1 AND workspace_id = $2")
            .bind(id)
            .bind(ws.id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
        if exists.is_none() {
            return Err(StoreError::not_found(format!("webhook {id}")));
        }
        log(&mut tx, id, None, webhook::TEST_EVENT, 1, result, outcome).await?;
        let sql = format!("{DELIVERY_SELECT} WHERE webhook_id = $1 ORDER BY id DESC LIMIT 1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&mut *tx).await.map_err(db)?;
        tx.commit().await.map_err(db)?;
        delivery_from_row(&row)
    }
}
/// One delivery log row (skipped if the subscription was deleted meanwhile),
/// keeping the newest `DELIVERIES_KEPT` of the subscription.
async fn log(
    conn: &mut PgConnection, webhook_id: i64, event_id: Option<i64>, event_type: &str, attempt: u32,
    result: &AttemptResult, outcome: DeliveryOutcome,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO webhook_deliveries (webhook_id, event_id, event_type, attempt, status_code, error, duration_ms, outcome, at)
         SELECT id, $1, $2, $3, $4, $5, $6, $7, clock_timestamp() FROM webhooks WHERE id = $8",
    )
    .bind(event_id)
    .bind(event_type)
    .bind(i32::try_from(attempt).unwrap_or(i32::MAX))
    .bind(result.status_code.map(i32::from))
    .bind(result.error.as_deref())
    .bind(i64::try_from(result.duration_ms).unwrap_or(i64::MAX))
    .bind(outcome.as_str())
    .bind(webhook_id)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    sqlx::query(
        "DELETE FROM webhook_deliveries WHERE webhook_id = $1 AND id <= (
            SELECT id FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)",
    )
    .bind(webhook_id)
    .bind(webhook::DELIVERIES_KEPT)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(())
}
