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

/// The second step: waits (at most [`SETTLE`]) for every transaction that
/// may have looked for a row before this one committed (migration
/// `0014_ready_waiters.sql`).
const SETTLED: &str = "SELECT pad_ready_settled(make_interval(secs => $1))";

/// How long one settling waits before the listener serves its notifications
/// and tries again.
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

    /// Waits until this instance is armed, for at most [`ARM_WAIT`].
    pub(crate) async fn arm(&self) {
        let mut armed = self.armed.subscribe();
        if *armed.borrow_and_update() {
            return;
        }
        self.arm.notify_one();
        let _ = tokio::time::timeout(ARM_WAIT, armed.wait_for(|a| *a)).await;
    }

    /// Tests: whether this instance's row is in place.
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

    /// The row is gone (or about to be): later subscribers arm again.
    fn disarmed(&self) {
        self.armed.send_replace(false);
    }
}

async fn listen(ready: Weak<Ready>, opts: PgConnectOptions) {
    let pool = PgPoolOptions::new().max_connections(1).connect_lazy_with(opts);
    let mut listener: Option<PgListener> = None;
    let mut idle_since: Option<Instant> = None;
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
        let settled = match keep_armed(&r, l, &mut idle_since).await {
            Ok(settled) => settled,
            Err(e) => {
                tracing::warn!(error = %e, "long polls: cannot arm the database's wake-ups; reconnecting");
                r.disarmed();
                let _ = r.tx.send(());
                listener = None;
                drop(r);
                tokio::time::sleep(CHECK).await;
                continue;
            }
        };
        // Not settled (a long transaction may have looked before the row):
        // serve what was notified meanwhile, then try again soon.
        let check = if settled { CHECK } else { Duration::from_millis(50) };
        let outcome = tokio::select! {
            got = tokio::time::timeout(check, l.try_recv()) => Some(got),
            () = r.arm.notified() => None,
        };
        drop(r);
        match outcome {
            None | Some(Err(_)) => {}
            Some(Ok(Ok(Some(_)))) => wake(&ready),
            // The connection was lost and re-established: notifications in
            // between are gone, and the new connection's backend has no row.
            Some(Ok(Ok(None))) => {
                if let Some(r) = ready.upgrade() {
                    r.disarmed();
                }
                wake(&ready)
            }
            Some(Ok(Err(e))) => {
                tracing::warn!(error = %e, "long polls: the notification connection failed; reconnecting");
                if let Some(r) = ready.upgrade() {
                    r.disarmed();
                }
                listener = None;
                tokio::time::sleep(CHECK).await;
            }
        }
    }
    if let Some(mut l) = listener {
        let _ = sqlx::query(DISARM).execute(&mut l).await;
    }
    pool.close().await;
}

/// Arms when there are subscribers and the row is not in place; removes
/// the row once there have been none for the linger time. False when an
/// arming has not settled yet.
async fn keep_armed(r: &Ready, l: &mut PgListener, idle_since: &mut Option<Instant>) -> sqlx::Result<bool> {
    let subscribers = r.tx.receiver_count() > 0;
    if subscribers {
        *idle_since = None;
        if !r.armed() {
            sqlx::raw_sql(ARM).execute(&mut *l).await?;
            let settled: bool = sqlx::query_scalar(SETTLED).bind(SETTLE.as_secs_f64()).fetch_one(&mut *l).await?;
            if !settled {
                return Ok(false);
            }
            r.armed.send_replace(true);
            // A waiter woken while unarmed (after a lost connection) may
            // have looked before a change that went unnotified: look again.
            let _ = r.tx.send(());
        }
        return Ok(true);
    }
    if !r.armed() {
        return Ok(true);
    }
    let since = *idle_since.get_or_insert_with(Instant::now);
    if since.elapsed() < r.linger() {
        return Ok(true);
    }
    // Cleared before the count is read again, so a subscriber that read
    // "armed" is counted here and keeps the row.
    r.disarmed();
    if r.tx.receiver_count() > 0 {
        r.armed.send_replace(true);
        return Ok(true);
    }
    *idle_since = None;
    sqlx::query(DISARM).execute(&mut *l).await?;
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

fn wake(ready: &Weak<Ready>) {
    if let Some(r) = ready.upgrade() {
        let _ = r.tx.send(());
    }
}
