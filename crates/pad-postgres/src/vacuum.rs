//! A drain's dead index entries, cleared as it goes (docs/operations.md,
//! "Long drains and VACUUM"). Every lease write leaves the item's old row
//! version behind, and its entry in the frontier's index (`items_frontier`)
//! with it; the entries of items already drained sit at the front of the
//! index, where every claim-next starts its walk. Until a `VACUUM` removes
//! them, each claim-next steps over all of them, so its cost grows with the
//! items drained since the last one; autovacuum waits for a fifth of the
//! table to be dead, and may skip the indexes. So every
//! `PAD_PG_VACUUM_EVERY` lease calls an instance vacuums `items` itself,
//! indexes included, on a connection of its own, one at a time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use pad_store::{StoreError, StoreResult};
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use tokio::sync::watch;

/// Lease calls between two vacuums unless `PAD_PG_VACUUM_EVERY` says
/// otherwise: about 2 000 drained items (a claim and an end each).
pub const DEFAULT_VACUUM_EVERY: u64 = 4000;

/// `INDEX_CLEANUP ON`: a vacuum may otherwise leave the indexes as they are
/// when few of the table's pages changed, which on a large table is always
/// the case between two of these. No `SKIP_LOCKED`: a vacuum already running
/// (another instance's, autovacuum's) is waited for, so when this one ends
/// the entries are gone.
const VACUUM: &str = "VACUUM (INDEX_CLEANUP ON) items";

pub(crate) struct Vacuum {
    opts: PgConnectOptions,
    /// 0: never.
    every: AtomicU64,
    calls: AtomicU64,
    running: AtomicBool,
    /// Vacuums finished (or failed), for tests.
    finished: watch::Sender<u64>,
}

impl Vacuum {
    pub(crate) fn new(opts: PgConnectOptions, every: u64) -> Arc<Self> {
        Arc::new(Vacuum {
            opts,
            every: AtomicU64::new(every),
            calls: AtomicU64::new(0),
            running: AtomicBool::new(false),
            finished: watch::channel(0).0,
        })
    }

    /// Counts a lease call; every `every`th starts a vacuum unless one of
    /// this instance's still runs (the next `every`th will).
    pub(crate) fn count(self: &Arc<Self>) {
        let every = self.every.load(Ordering::Relaxed);
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        if every > 0 && n.is_multiple_of(every) && !self.running.swap(true, Ordering::AcqRel) {
            tokio::spawn(Arc::clone(self).run());
        }
    }

    async fn run(self: Arc<Self>) {
        let vacuumed = async {
            let mut conn = PgConnection::connect_with(&self.opts).await?;
            sqlx::raw_sql(VACUUM).execute(&mut conn).await?;
            conn.close().await
        };
        if let Err(e) = vacuumed.await {
            // Nothing is lost: the next one, or autovacuum, clears the entries.
            tracing::warn!(error = %e, "long drains: cannot vacuum the items table");
        }
        self.running.store(false, Ordering::Release);
        self.finished.send_modify(|n| *n += 1);
    }

    pub(crate) fn set_every(&self, every: u64) {
        self.every.store(every, Ordering::Relaxed);
    }

    /// Waits until `n` vacuums have finished.
    pub(crate) async fn finished(&self, n: u64) {
        let mut rx = self.finished.subscribe();
        // The sender lives as long as `self`.
        let _ = rx.wait_for(|done| *done >= n).await;
    }
}

/// `PAD_PG_VACUUM_EVERY`: a count of lease calls, 0 to leave vacuuming to
/// autovacuum.
pub(crate) fn every_from_env() -> StoreResult<u64> {
    std::env::var(EVERY).map_or(Ok(DEFAULT_VACUUM_EVERY), |v| parse_every(&v))
}

const EVERY: &str = "PAD_PG_VACUUM_EVERY";

fn parse_every(v: &str) -> StoreResult<u64> {
    v.parse::<u64>()
        .map_err(|_| StoreError::invalid(EVERY, format!("{v:?} is not a count of lease calls (0 turns it off)")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_vacuum_interval_is_a_count_and_0_turns_it_off() {
        assert_eq!(super::parse_every("4000").unwrap(), 4000);
        assert_eq!(super::parse_every("0").unwrap(), 0);
        for bad in ["-1", "1.5", "often", ""] {
            let e = super::parse_every(bad).unwrap_err();
            assert!(e.to_string().contains("PAD_PG_VACUUM_EVERY"), "{bad}: {e}");
        }
    }
}
