//! SIGINT and SIGTERM, caught so that they reach CMD's group and the lease
//! is released after it stops, instead of ending pad with the lease held
//! (docs/leases.md, "Working under a lease").

use std::sync::Arc;

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::watch;

use crate::error::CliError;

/// The two signals, caught (`pad guard` waits on them directly).
pub(in crate::commands) struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    pub(in crate::commands) fn catch() -> Result<Self, CliError> {
        Ok(Signals { interrupt: signal(SignalKind::interrupt())?, terminate: signal(SignalKind::terminate())? })
    }

    pub(in crate::commands) async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.interrupt.recv() => libc::SIGINT,
            _ = self.terminate.recv() => libc::SIGTERM,
        }
    }
}

/// The signals as every job of a supervisor sees them: each job holds a
/// clone, and each signal reaches all of them (a drain with `--jobs N`
/// stops all N groups on one Ctrl-C).
#[derive(Clone)]
pub(super) struct Stop {
    rx: watch::Receiver<Option<i32>>,
    tx: Arc<watch::Sender<Option<i32>>>,
}

impl Stop {
    /// Catches the signals from now on: call before any lease is taken.
    pub(super) fn catch() -> Result<Stop, CliError> {
        let mut signals = Signals::catch()?;
        let (tx, rx) = watch::channel(None);
        let tx = Arc::new(tx);
        let relay = Arc::clone(&tx);
        tokio::spawn(async move {
            loop {
                let sig = signals.recv().await;
                relay.send_replace(Some(sig));
            }
        });
        Ok(Stop { rx, tx })
    }

    /// The last signal received, if any: nothing new is started after one.
    pub(super) fn received(&self) -> Option<i32> {
        *self.rx.borrow()
    }

    /// Waits for the next signal (each one, a second Ctrl-C too).
    pub(super) async fn recv(&mut self) -> i32 {
        loop {
            if self.rx.changed().await.is_err() {
                // The relay never ends while pad runs; should it, no signal comes.
                std::future::pending::<()>().await;
            }
            if let Some(sig) = *self.rx.borrow_and_update() {
                return sig;
            }
        }
    }

    /// A signal that reached CMD rather than pad (Ctrl-C at the terminal
    /// CMD owned) counts as pad's: the drain stops.
    pub(super) fn raise(&self, sig: i32) {
        self.tx.send_replace(Some(sig));
    }
}
