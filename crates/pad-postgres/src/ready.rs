//! Long polls across instances (docs/api.md, "Batches and long polls"):
//! every committed change that may make an item ready notifies the channel
//! `pad_ready` (a trigger on `events`, migration `0011_ready_notify.sql`),
//! while some instance has a claim-next that may wait (docs/api.md,
//! "Wake-ups only while someone waits", migration
//! `0014_ready_waiters.sql`).
//!
//! The listener starts with the first long poll, on a connection of its own
//! (not the serving pool's), and stops once the store is dropped. While this
//! instance has subscribers it keeps its row in `ready_waiters` (it is
//! *armed*); once it has had none for [`Ready::linger`] it removes the row.
//! After a lost connection it reconnects, arms again under the new
//! connection, and wakes every waiter, since notifications sent meanwhile
//! are gone.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::{Notify, broadcast, watch};
use tokio::time::Instant;

/// The channel the migration's trigger notifies.
const CHANNEL: &str = "pad_ready";

/// How often the listener checks that its store still exists and whether
/// it still has subscribers, and waits before reconnecting after an error.
const CHECK: Duration = Duration::from_secs(2);

/// How long an arming waits for the database before the waiter goes on
/// without it (its periodic look still finds the work).
const ARM_WAIT: Duration = Duration::from_secs(5);

/// How long the row stays after the last subscriber left: a worker that
/// waits again soon after finds it armed and needs no extra look.
const LINGER: Duration = Duration::from_secs(10);

/// Arms this connection's backend, first of two steps: removes the rows of
/// backends that are gone and inserts its own, committed.
const ARM: &str = "DELETE FROM ready_waiters w WHERE NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = w.pid);
INSERT INTO ready_waiters (pid) VALUES (pg_backend_pid()) ON CONFLICT DO NOTHING;";

/// The second step: the transactions that may have looked for a row before
/// this one committed (migration `0014_ready_waiters.sql`)...
const HOLDERS: &str = "SELECT pad_ready_holders()";

/// ...and the wait, at most [`SETTLE`] at a time, until they have all ended.
const SETTLED: &str = "SELECT pad_ready_settled($1, make_interval(secs => $2))";

/// How long one settling waits before the listener serves its notifications
/// and waits again for the same holders.
const SETTLE: Duration = Duration::from_secs(1);

const DISARM: &str = "DELETE FROM ready_waiters WHERE pid = pg_backend_pid()";

pub(crate) struct Ready {
    tx: broadcast::Sender<()>,
    started: AtomicBool,
    opts: PgConnectOptions,
    /// True while this instance's row is in place: every change committed
    /// since is notified.
    armed: watch::Sender<bool>,
    /// Asks the listener to arm now.
    arm: Notify,
    linger_ms: AtomicU64,
}

impl Ready {
    pub(crate) fn new(opts: PgConnectOptions) -> Arc<Self> {
        Arc::new(Ready {
            tx: broadcast::channel(16).0,
            started: AtomicBool::new(false),
            opts,
            armed: watch::channel(false).0,
            arm: Notify::new(),
            linger_ms: AtomicU64::new(LINGER.as_millis() as u64),
        })
    }

    /// A receiver of wake-ups, and whether every change committed from now
    /// on is already notified; starts the listener on first use. The
    /// receiver counts as a subscriber until it is dropped.
    pub(crate) fn subscribe(self: &Arc<Self>) -> pad_store::ReadySignals {
        let rx = self.tx.subscribe();
        if !self.started.swap(true, Ordering::AcqRel) {
            tokio::spawn(listen(Arc::downgrade(self), self.opts.clone()));
        }
        // Read after subscribing: the listener disarms only when it has no
        // subscriber, and re-checks that after clearing the flag.
        pad_store::ReadySignals { rx, armed: *self.armed.borrow() }
    }

    /// Waits until this instance is armed, for at most [`ARM_WAIT`]; false
    /// when it is not armed by then.
    pub(crate) async fn arm(&self) -> bool {
        let mut armed = self.armed.subscribe();
        if *armed.borrow_and_update() {
            return true;
        }
        self.arm.notify_one();
        tokio::time::timeout(ARM_WAIT, armed.wait_for(|a| *a)).await.is_ok()
    }

    /// Whether this instance is armed: its row is in place and every
    /// transaction that may have looked before it has ended.
    pub(crate) fn armed(&self) -> bool {
        *self.armed.borrow()
    }

    /// Tests: how long the row stays after the last subscriber left.
    pub(crate) fn set_linger(&self, linger: Duration) {
        self.linger_ms.store(linger.as_millis() as u64, Ordering::Relaxed);
    }

    fn linger(&self) -> Duration {
        Duration::from_millis(self.linger_ms.load(Ordering::Relaxed))
    }

    /// Not armed (the row is gone, about to be, or not settled): later
    /// subscribers arm again.
    fn disarmed(&self) {
        self.armed.send_replace(false);
    }
}

/// What the listener knows of its connection's row.
#[derive(Default)]
struct Row {
    /// Committed under this connection's backend.
    present: bool,
    /// The transactions the arming still waits for, until they have ended.
    holders: Option<Vec<String>>,
    /// Since when the row has had no subscriber.
    idle_since: Option<Instant>,
}

async fn listen(ready: Weak<Ready>, opts: PgConnectOptions) {
    let pool = PgPoolOptions::new().max_connections(1).connect_lazy_with(opts);
    let mut listener: Option<PgListener> = None;
    let mut row = Row::default();
    loop {
        let Some(r) = ready.upgrade() else { break };
        let l = match listener.as_mut() {
            Some(l) => l,
            None => match subscribe(&pool).await {
                Ok(l) => {
                    // Whatever was notified while no one listened is lost: look again.
                    let _ = r.tx.send(());
                    listener.insert(l)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "long polls: cannot listen for ready work; retrying");
                    drop(r);
                    tokio::time::sleep(CHECK).await;
                    continue;
                }
            },
        };
        let settled = match keep_armed(&r, l, &mut row).await {
            Ok(settled) => settled,
            Err(e) => {
                tracing::warn!(error = %e, "long polls: cannot arm the database's wake-ups; reconnecting");
                lost(&r, &mut listener, &mut row);
                drop(r);
                tokio::time::sleep(CHECK).await;
                continue;
            }
        };
        // Not settled (a long transaction may have looked before the row):
        // serve what was notified meanwhile, then wait again soon.
        let check = if settled { CHECK } else { Duration::from_millis(50) };
        let outcome = tokio::select! {
            got = tokio::time::timeout(check, l.try_recv()) => Some(got),
            () = r.arm.notified() => None,
        };
        match outcome {
            None | Some(Err(_)) => {}
            Some(Ok(Ok(Some(_)))) => {
                let _ = r.tx.send(());
            }
            // The connection was lost: notifications since are gone, and
            // its backend's row with it. A new one is made by `subscribe`,
            // which nothing cancels.
            Some(Ok(Ok(None))) => lost(&r, &mut listener, &mut row),
            Some(Ok(Err(e))) => {
                tracing::warn!(error = %e, "long polls: the notification connection failed; reconnecting");
                lost(&r, &mut listener, &mut row);
                drop(r);
                tokio::time::sleep(CHECK).await;
            }
        }
    }
    if let Some(mut l) = listener.filter(|_| row.present) {
        let _ = sqlx::query(DISARM).execute(&mut l).await;
    }
    pool.close().await;
}

/// The listening connection is gone, and with it its row: not armed, and
/// every waiter looks again, since notifications may have been lost.
fn lost(r: &Ready, listener: &mut Option<PgListener>, row: &mut Row) {
    r.disarmed();
    let _ = r.tx.send(());
    *listener = None;
    *row = Row::default();
}

/// Arms when there are subscribers and the instance is not armed; removes
/// the row once it has had no subscriber for the linger time, settled or
/// not. False while an arming waits for transactions that have not ended.
async fn keep_armed(r: &Ready, l: &mut PgListener, row: &mut Row) -> sqlx::Result<bool> {
    if r.tx.receiver_count() > 0 {
        row.idle_since = None;
        if r.armed() {
            return Ok(true);
        }
        if !row.present {
            sqlx::raw_sql(ARM).execute(&mut *l).await?;
            row.present = true;
            row.holders = Some(sqlx::query_scalar(HOLDERS).fetch_one(&mut *l).await?);
        }
        if let Some(holders) = &row.holders {
            let settled: bool =
                sqlx::query_scalar(SETTLED).bind(holders).bind(SETTLE.as_secs_f64()).fetch_one(&mut *l).await?;
            if !settled {
                return Ok(false);
            }
            row.holders = None;
        }
        // A waiter woken while unarmed (after a lost connection) may have
        // looked before a change that went unnotified: look again. Sent
        // before the flag is set, so whoever sees the flag has it queued.
        let _ = r.tx.send(());
        r.armed.send_replace(true);
        return Ok(true);
    }
    if !row.present {
        return Ok(true);
    }
    let since = *row.idle_since.get_or_insert_with(Instant::now);
    if since.elapsed() < r.linger() {
        return Ok(true);
    }
    // Cleared before the count is read again, so a subscriber that read
    // "armed" is counted here and keeps the row.
    let was_armed = r.armed();
    r.disarmed();
    if r.tx.receiver_count() > 0 {
        if was_armed {
            r.armed.send_replace(true);
        }
        return Ok(true);
    }
    sqlx::query(DISARM).execute(&mut *l).await?;
    *row = Row::default();
    Ok(true)
}

async fn subscribe(pool: &sqlx::PgPool) -> Result<PgListener, sqlx::Error> {
    let mut l = PgListener::connect_with(pool).await?;
    // A lost connection is reported at once (`Ok(None)`), never replaced
    // inside a `try_recv` this loop may cancel: the new connection's backend
    // has no row, and the loop must know to arm it.
    l.eager_reconnect(false);
    l.listen(CHANNEL).await?;
    Ok(l)
}
