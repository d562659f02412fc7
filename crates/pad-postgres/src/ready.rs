//! Long polls across instances (docs/api.md, "Batches and long polls"):
//! every committed change that may make an item ready notifies the channel
//! `pad_ready` (a trigger on `events`, migration `0011_ready_notify.sql`),
//! and each instance that has a waiting claim-next listens to it.
//!
//! The listener starts with the first long poll, on a connection of its own
//! (not the serving pool's), and stops once the store is dropped. After a
//! lost connection it reconnects and wakes every waiter, since
//! notifications sent meanwhile are gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::broadcast;

/// The channel the migration's trigger notifies.
const CHANNEL: &str = "pad_ready";

/// How often the listener checks that its store still exists, and waits
/// before reconnecting after an error.
const CHECK: Duration = Duration::from_secs(2);

pub(crate) struct Ready {
    tx: broadcast::Sender<()>,
    started: AtomicBool,
    opts: PgConnectOptions,
}

impl Ready {
    pub(crate) fn new(opts: PgConnectOptions) -> Arc<Self> {
        Arc::new(Ready { tx: broadcast::channel(16).0, started: AtomicBool::new(false), opts })
    }

    /// A receiver of wake-ups; starts the listener on first use.
    pub(crate) fn subscribe(self: &Arc<Self>) -> broadcast::Receiver<()> {
        let rx = self.tx.subscribe();
        if !self.started.swap(true, Ordering::AcqRel) {
            tokio::spawn(listen(Arc::downgrade(self), self.opts.clone()));
        }
        rx
    }
}

async fn listen(ready: Weak<Ready>, opts: PgConnectOptions) {
    let pool = PgPoolOptions::new().max_connections(1).connect_lazy_with(opts);
    let mut listener: Option<PgListener> = None;
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
        drop(r);
        match tokio::time::timeout(CHECK, l.try_recv()).await {
            Err(_) => {}
            Ok(Ok(Some(_))) => wake(&ready),
            // The connection was lost and re-established: notifications in between are gone.
            Ok(Ok(None)) => wake(&ready),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "long polls: the notification connection failed; reconnecting");
                listener = None;
                tokio::time::sleep(CHECK).await;
            }
        }
    }
    pool.close().await;
}

async fn subscribe(pool: &sqlx::PgPool) -> Result<PgListener, sqlx::Error> {
    let mut l = PgListener::connect_with(pool).await?;
    l.listen(CHANNEL).await?;
    Ok(l)
}

fn wake(ready: &Weak<Ready>) {
    if let Some(r) = ready.upgrade() {
        let _ = r.tx.send(());
    }
}
