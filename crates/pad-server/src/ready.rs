//! Long polls (docs/api.md, "Batches and long polls"): what wakes a
//! claim-next that waits for work.
//!
//! A waiting claim-next looks again when this instance commits an event
//! ([`AppState::event_committed`]), when the store reports a change another
//! instance committed (PostgreSQL's LISTEN/NOTIFY, [`Store::ready_signals`]),
//! and once every [`RELOOK`] (`AppState::relook`), because time alone also makes items ready (a
//! lease expires, a retry time or `not_before` passes). It stops waiting at
//! its deadline and when the server begins to shut down.
//!
//! The database notifies only while some claim-next may wait (docs/api.md,
//! "Wake-ups only while someone waits"): a waiter whose store signals were
//! not yet armed arms them before it first waits, and looks once more.

use std::sync::Arc;
use std::time::Duration;

use pad_store::Store;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use crate::AppState;

/// How often a waiting claim-next looks again with no signal: the most an
/// item made ready by the clock alone waits for a waiting worker.
pub const RELOOK: Duration = Duration::from_secs(1);

/// Room left between a long poll's end and the request deadline, so the
/// answer is always written before the deadline cuts the connection.
const ANSWER_ROOM: Duration = Duration::from_secs(1);

pub struct ReadySignals {
    relook: Duration,
    local: Option<broadcast::Receiver<()>>,
    store: Option<broadcast::Receiver<()>>,
    /// The store, while its signals are still to be armed.
    to_arm: Option<Arc<dyn Store>>,
    closing: watch::Receiver<bool>,
}

impl AppState {
    /// Signals to wait on, subscribed now: a change committed after this
    /// call wakes the waiter even if it is not yet waiting.
    pub fn ready_signals(&self) -> ReadySignals {
        let store = self.store.ready_signals();
        let to_arm = store.as_ref().is_some_and(|s| !s.armed).then(|| self.store.clone());
        ReadySignals {
            relook: self.relook,
            local: Some(self.wakes.subscribe()),
            store: store.map(|s| s.rx),
            to_arm,
            closing: self.closing.subscribe(),
        }
    }

    /// The longest a long poll may wait on this server: what was asked, cut
    /// to fit inside the request deadline (`PAD_REQUEST_TIMEOUT`).
    pub fn wait_bound(&self, asked: Duration) -> Duration {
        asked.min(self.connections.request_timeout.saturating_sub(ANSWER_ROOM))
    }
}

impl ReadySignals {
    /// Waits for a reason to look again. False when `deadline` has passed or
    /// the server is closing: stop waiting and answer.
    pub async fn wait_until(&mut self, deadline: Instant) -> bool {
        if Instant::now() >= deadline || *self.closing.borrow() {
            return false;
        }
        let relook = (Instant::now() + self.relook).min(deadline);
        if let Some(store) = self.to_arm.take() {
            // A change committed before the store's signals were armed may
            // have gone unsignalled: look once more once they are. Until
            // then the waiter still wakes as any waiter does.
            let armed = tokio::select! {
                armed = store.arm_ready_signals() => armed,
                () = signal(&mut self.local) => false,
                () = signal(&mut self.store) => false,
                () = tokio::time::sleep_until(relook) => false,
                _ = self.closing.changed() => return false,
            };
            if !armed {
                self.to_arm = Some(store);
            }
            return Instant::now() < deadline;
        }
        tokio::select! {
            () = signal(&mut self.local) => {}
            () = signal(&mut self.store) => {}
            () = tokio::time::sleep_until(relook) => return relook < deadline,
            _ = self.closing.changed() => return false,
        }
        Instant::now() < deadline
    }
}

/// The next signal on `rx`; never, once its sender is gone. A lagging
/// receiver missed signals, which is itself a reason to look.
async fn signal(rx: &mut Option<broadcast::Receiver<()>>) {
    let Some(r) = rx else { return std::future::pending().await };
    match r.recv().await {
        Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) => {}
        Err(broadcast::error::RecvError::Closed) => {
            *rx = None;
            std::future::pending::<()>().await;
        }
    }
}
