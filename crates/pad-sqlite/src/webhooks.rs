//! Webhook subscriptions, their outbox and delivery log on SQLite
//! (docs/webhooks.md). Mirrors `pad-postgres/src/webhooks.rs` function by
//! function. Writes run on the one writer connection, so claims never race.

use async_trait::async_trait;
use pad_core::webhook::{self, CreateWebhook, DeliveryOutcome, Webhook, WebhookDelivery};
use pad_core::{EventKind, Workspace};
use pad_store::steps::Begin;
use pad_store::{Actor, AttemptResult, DueDelivery, StoreError, StoreResult, WebhookOps, WebhookTarget};
use rusqlite::{Connection, Row};

use crate::SqliteStore;
use crate::events::event_from_row;
use crate::sql::{Col, Db, micros};

const WEBHOOK_SELECT: &str = "SELECT w.id, w.url, w.event_types, u.email, w.created_at, w.paused_at, w.dropped,
        (SELECT COUNT(*) FROM webhook_outbox o WHERE o.webhook_id = w.id) AS pending
    FROM webhooks w LEFT JOIN users u ON u.id = w.created_by";

/// The due heads (docs/webhooks.md, "Isolation"): each active subscription's
/// oldest row, found through the `(webhook_id, event_id)` index, when its
/// attempt is due and no claim on it runs, and while its account has a slot:
/// fewer than ?3 of its subscriptions' heads under a running claim, counting
/// those this look takes, oldest due first. A subscription's account is the
/// one its workspace's creation was charged to (`workspaces.charged_to`),
/// whoever the members are now; a workspace without one (it had no members
/// when pad began recording it) is an account of its own (docs/webhooks.md,
/// "Isolation"). The rows behind a head are never read, so the cost follows
/// the subscriptions, not the queue. ?1 now, ?2 limit, ?3 the per-account
/// cap.
const DUE_HEADS: &str = "WITH subs AS MATERIALIZED (
        SELECT o.id, o.next_attempt_at, o.claimed_until, w.paused_at,
            COALESCE((SELECT ws.charged_to FROM workspaces ws WHERE ws.id = w.workspace_id),
                -w.workspace_id) AS account
        FROM webhooks w
        JOIN webhook_outbox o ON o.id = (
            SELECT h.id FROM webhook_outbox h WHERE h.webhook_id = w.id ORDER BY h.event_id LIMIT 1)),
    busy AS (SELECT account, COUNT(*) AS n FROM subs WHERE claimed_until > ?1 GROUP BY account),
    ranked AS (
        SELECT d.id, d.next_attempt_at,
            ROW_NUMBER() OVER (PARTITION BY d.account ORDER BY d.next_attempt_at, d.id) + COALESCE(b.n, 0) AS slot
        FROM subs d LEFT JOIN busy b ON b.account = d.account
        WHERE d.paused_at IS NULL
          AND d.next_attempt_at <= ?1 AND (d.claimed_until IS NULL OR d.claimed_until <= ?1))
    SELECT id FROM ranked WHERE slot <= ?3 ORDER BY next_attempt_at, id LIMIT ?2";

/// Per subscription, the newest event past the cap (?1 rows kept), if its
/// queue is over it: that event and older ones are dropped.
const OVER_CAP: &str = "SELECT id FROM (
        SELECT w.id, (SELECT o.event_id FROM webhook_outbox o WHERE o.webhook_id = w.id
            ORDER BY o.event_id DESC LIMIT 1 OFFSET ?1) AS cut
        FROM webhooks w)
    WHERE cut IS NOT NULL";

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
        paused: row.opt_ts("paused_at")?.is_some(),
        paused_at: row.opt_ts("paused_at")?,
        dropped: row.col("dropped")?,
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

#[async_trait]
impl WebhookOps for SqliteStore {
    async fn create_webhook(
        &self, ws: &Workspace, actor: Actor, new: &CreateWebhook, secret: &str,
    ) -> StoreResult<Webhook> {
        webhook::validate_url(&new.url)?;
        let events = serde_json::to_string(&webhook::normalize_events(&new.events))
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        let tx = self.begin().await?;
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

    async fn list_webhooks(&self, ws: &Workspace) -> StoreResult<Vec<Webhook>> {
        let sql = format!("{WEBHOOK_SELECT} WHERE w.workspace_id = ? ORDER BY w.id");
        let ws_id = ws.id;
        self.read(move |c| c.all(&sql, [ws_id], webhook_from_row)).await
    }

    async fn delete_webhook(&self, ws: &Workspace, id: i64) -> StoreResult<()> {
        let tx = self.begin().await?;
        let gone = tx.conn().exec("DELETE FROM webhooks WHERE id = ? AND workspace_id = ?", (id, ws.id))?;
        if gone == 0 {
            return Err(StoreError::not_found(format!("webhook {id}")));
        }
        tx.commit().await
    }

    /// Clears the pause (docs/webhooks.md, "Paused subscriptions"); the queued
    /// events are due again at once, as they never stopped being.
    async fn resume_webhook(&self, ws: &Workspace, id: i64) -> StoreResult<Webhook> {
        let tx = self.begin().await?;
        let conn = tx.conn();
        let found = conn.exec("UPDATE webhooks SET paused_at = NULL WHERE id = ? AND workspace_id = ?", (id, ws.id))?;
        if found == 0 {
            return Err(StoreError::not_found(format!("webhook {id}")));
        }
        let resumed = conn.one(&format!("{WEBHOOK_SELECT} WHERE w.id = ?"), [id], webhook_from_row)?;
        tx.commit().await?;
        Ok(resumed)
    }

    /// Drops the oldest queued deliveries past `keep` per subscription, never
    /// one under a running claim, and counts them on the subscription
    /// (docs/webhooks.md, "A full queue"). Looks on a reader first: the writer
    /// is taken only when a queue is over the cap.
    async fn trim_webhook_queues(&self, keep: i64) -> StoreResult<u64> {
        let over = self.read(move |c| c.all(OVER_CAP, [keep], |r| r.col::<i64>("id"))).await?;
        if over.is_empty() {
            return Ok(0);
        }
        let tx = self.begin().await?;
        let conn = tx.conn();
        let now = micros(tx.now);
        let mut dropped = 0u64;
        for id in over {
            let Some(cut) = conn.opt(
                "SELECT event_id FROM webhook_outbox WHERE webhook_id = ? ORDER BY event_id DESC LIMIT 1 OFFSET ?",
                (id, keep),
                |r| r.col::<i64>(0),
            )?
            else {
                continue;
            };
            let n = conn.exec(
                "DELETE FROM webhook_outbox WHERE webhook_id = ?1 AND event_id <= ?2
                   AND (claimed_until IS NULL OR claimed_until <= ?3)",
                (id, cut, now),
            )?;
            conn.exec("UPDATE webhooks SET dropped = dropped + ? WHERE id = ?", (n as i64, id))?;
            dropped += n as u64;
        }
        tx.commit().await?;
        Ok(dropped)
    }

    async fn webhook_target(&self, ws: &Workspace, id: i64) -> StoreResult<WebhookTarget> {
        let ws_id = ws.id;
        self.read(move |c| {
            c.opt("SELECT id, url, secret FROM webhooks WHERE id = ? AND workspace_id = ?", (id, ws_id), |r| {
                Ok(WebhookTarget { id: r.col("id")?, url: r.col("url")?, secret: r.col("secret")? })
            })
        })
        .await?
        .ok_or_else(|| StoreError::not_found(format!("webhook {id}")))
    }

    async fn webhook_deliveries(&self, ws: &Workspace, id: i64, limit: u32) -> StoreResult<Vec<WebhookDelivery>> {
        self.webhook_target(ws, id).await?;
        let sql = format!("{DELIVERY_SELECT} WHERE webhook_id = ? ORDER BY id DESC LIMIT ?");
        self.read(move |c| c.all(&sql, (id, i64::from(limit.clamp(1, 500))), delivery_from_row)).await
    }

    async fn claim_webhook_deliveries(&self, limit: u32, hold_seconds: i64) -> StoreResult<Vec<DueDelivery>> {
        // Asked after writes and every second: look on a reader first, so
        // while nothing is due (an idle outbox, or only queues behind heads
        // waiting for their retry) the writer is never taken (docs/webhooks.md,
        // "Isolation"). Nor while only heads of accounts at their cap are:
        // they are left unclaimed, for a look after one of theirs ends.
        let now = micros(self.clock.read());
        let cap = i64::from(DueDelivery::IN_FLIGHT_PER_ACCOUNT);
        let any = self.read(move |c| c.opt(DUE_HEADS, (now, 1, cap), |_| Ok(()))).await?;
        if any.is_none() {
            return Ok(Vec::new());
        }
        let tx = self.begin().await?;
        let conn = tx.conn();
        let now = micros(tx.now);
        let claimed: Vec<i64> = conn.all(
            &format!(
                "UPDATE webhook_outbox SET claim = lower(hex(randomblob(16))), claimed_until = ?4
                 WHERE id IN ({DUE_HEADS}) RETURNING id"
            ),
            (now, i64::from(limit), cap, now + hold_seconds * 1_000_000),
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

    async fn finish_webhook_delivery(&self, due: &DueDelivery, result: &AttemptResult) -> StoreResult<()> {
        let attempt = due.attempts + 1;
        let (outcome, retry) = webhook::after_attempt(attempt, result.status_code);
        let tx = self.begin().await?;
        let conn = tx.conn();
        let now = micros(tx.now);
        match retry {
            None => {
                let ended =
                    conn.exec("DELETE FROM webhook_outbox WHERE id = ? AND claim = ?", (due.outbox_id, &due.claim))?;
                // Given up while the claim was still ours: the subscription
                // pauses (docs/webhooks.md, "Paused subscriptions").
                if ended == 1 && outcome == DeliveryOutcome::Failed {
                    conn.exec(
                        "UPDATE webhooks SET paused_at = ? WHERE id = ? AND paused_at IS NULL",
                        (now, due.webhook_id),
                    )?;
                }
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
        log(conn, due.webhook_id, Some(due.event.id), due.event.kind.as_str(), attempt, result, outcome, now)?;
        tx.commit().await
    }

    async fn log_webhook_test(&self, ws: &Workspace, id: i64, result: &AttemptResult) -> StoreResult<WebhookDelivery> {
        let outcome =
            if webhook::accepted(result.status_code) { DeliveryOutcome::Delivered } else { DeliveryOutcome::Failed };
        let tx = self.begin().await?;
        let conn = tx.conn();
        let exists = conn.opt("SELECT id FROM webhooks WHERE id = ? AND workspace_id = ?", (id, ws.id), |_| Ok(()))?;
        if exists.is_none() {
            return Err(StoreError::not_found(format!("webhook {id}")));
        }
        log(conn, id, None, webhook::TEST_EVENT, 1, result, outcome, micros(tx.now))?;
        let logged = conn.one(
            &format!("{DELIVERY_SELECT} WHERE webhook_id = ? ORDER BY id DESC LIMIT 1"),
            [id],
            delivery_from_row,
        )?;
        tx.commit().await?;
        Ok(logged)
    }
}
/// One delivery log row (skipped if the subscription was deleted meanwhile),
/// keeping the newest `DELIVERIES_KEPT` of the subscription.
#[allow(clippy::too_many_arguments)]
fn log(
    conn: &Connection, webhook_id: i64, event_id: Option<i64>, event_type: &str, attempt: u32, result: &AttemptResult,
    outcome: DeliveryOutcome, now: i64,
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use pad_core::NewItem;
    use pad_core::webhook::CreateWebhook;
    use pad_store::steps::Begin;
    use pad_store::{Actor, AttemptResult, Store};

    use crate::SqliteStore;
    use crate::sql::{Col, Db};

    /// docs/webhooks.md, "Isolation": due heads are read from the
    /// subscriptions, each through the `(webhook_id, event_id)` index, so
    /// the look costs the same with 0 or 100 000 rows queued: no step of it
    /// walks the outbox.
    #[tokio::test]
    async fn the_look_for_due_heads_never_walks_the_outbox() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("pad.db")).await.unwrap();
        let sql = format!("EXPLAIN QUERY PLAN {}", super::DUE_HEADS);
        let plan: Vec<String> = store.read(move |c| c.all(&sql, (0, 1, 32), |r| r.col::<String>(3))).await.unwrap();
        assert!(plan.iter().all(|step| !step.starts_with("SCAN o") && !step.starts_with("SCAN h")), "{plan:?}");
        assert!(plan.iter().any(|step| step.contains("INDEX sqlite_autoindex_webhook_outbox_1")), "{plan:?}");
    }

    /// docs/webhooks.md, "Isolation": an account's heads past its cap of
    /// deliveries in flight are left unclaimed, while another account's are
    /// claimed in the same look; one claimed when a slot frees is still its
    /// first attempt, and none is lost.
    #[tokio::test]
    async fn an_account_at_its_cap_leaves_its_heads_unclaimed_for_later() {
        let cap = pad_store::DueDelivery::IN_FLIGHT_PER_ACCOUNT as usize;
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("pad.db")).await.unwrap();
        let hog = Actor { user_id: store.ensure_user("hog@example.com").await.unwrap().id };
        let other = Actor { user_id: store.ensure_user("other@example.com").await.unwrap().id };
        let hook = CreateWebhook { url: "http://127.0.0.1:9/".into(), events: vec![] };
        let mut hogs = 0;
        for w in 0..2 {
            let ws = store.create_workspace(&format!("hog-{w}"), "Hog", hog).await.unwrap();
            for _ in 0..20 {
                store.create_webhook(&ws, hog, &hook, "s").await.unwrap();
                hogs += 1;
            }
            store.create_item(&ws, hog, &NewItem { title: "flood".into(), ..Default::default() }).await.unwrap();
        }
        assert!(hogs > cap);
        let ws = store.create_workspace("other", "Other", other).await.unwrap();
        store.create_webhook(&ws, other, &hook, "s").await.unwrap();
        store.create_item(&ws, other, &NewItem { title: "wanted".into(), ..Default::default() }).await.unwrap();

        let first = store.claim_webhook_deliveries(100, 30).await.unwrap();
        let of_hog = first.iter().filter(|d| d.workspace.starts_with("hog-")).count();
        assert_eq!((of_hog, first.len() - of_hog), (cap, 1), "{first:?}");
        // At its cap: nothing more of the hog's, and nothing claimed and held.
        assert!(store.claim_webhook_deliveries(100, 30).await.unwrap().is_empty());
        let held: i64 =
            store.read(|c| c.scalar("SELECT COUNT(*) FROM webhook_outbox WHERE claim IS NOT NULL", [])).await.unwrap();
        assert_eq!(held as usize, cap + 1);

        // Each delivery that ends frees a slot for the next, a first attempt.
        let delivered = AttemptResult { status_code: Some(204), error: None, duration_ms: 1 };
        let mut sent = of_hog;
        let mut in_flight: Vec<_> = first.into_iter().filter(|d| d.workspace.starts_with("hog-")).collect();
        while let Some(done) = in_flight.pop() {
            store.finish_webhook_delivery(&done, &delivered).await.unwrap();
            let next = store.claim_webhook_deliveries(100, 30).await.unwrap();
            assert!(next.len() <= 1 && next.iter().all(|d| d.attempts == 0), "{next:?}");
            sent += next.len();
            in_flight.extend(next);
        }
        assert_eq!(sent, hogs);
        let left: i64 = store.read(|c| c.scalar("SELECT COUNT(*) FROM webhook_outbox", [])).await.unwrap();
        assert_eq!(left, 1, "only the other account's delivery, never finished here, is left");
    }

    /// docs/webhooks.md, "Isolation": events queued behind a subscription's
    /// head that waits for its retry are not due, so looking for due
    /// deliveries reads only and never waits for the writer (finding: a dead
    /// receiver's backlog made every look take the write lock).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_queue_behind_a_waiting_head_costs_no_write() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("pad.db")).await.unwrap();
        let owner = Actor { user_id: store.ensure_user("o@example.com").await.unwrap().id };
        let ws = store.create_workspace("dead", "Dead", owner).await.unwrap();
        let hook = CreateWebhook { url: "http://127.0.0.1:9/".into(), events: vec![] };
        store.create_webhook(&ws, owner, &hook, "s").await.unwrap();
        for title in ["one", "two", "three"] {
            store.create_item(&ws, owner, &NewItem { title: title.into(), ..Default::default() }).await.unwrap();
        }
        let mut head = store.claim_webhook_deliveries(10, 30).await.unwrap().remove(0);
        // The eleventh failure: the next attempt is 1024 s away.
        head.attempts = 10;
        let refused = AttemptResult { status_code: None, error: Some("could not connect".into()), duration_ms: 1 };
        store.finish_webhook_delivery(&head, &refused).await.unwrap();

        let held = store.begin().await.unwrap();
        let look = tokio::time::timeout(Duration::from_secs(60), store.claim_webhook_deliveries(10, 30)).await;
        drop(held);
        let due = look.expect("the look for due deliveries waited for the writer").unwrap();
        assert!(due.is_empty(), "{due:?}");
    }
}
