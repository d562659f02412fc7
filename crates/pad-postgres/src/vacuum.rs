//! A drain's dead index entries, cleared as it goes (docs/operations.md,
//! "Long drains and VACUUM"). Every lease write leaves the item's old row
//! version behind, and its entry in the frontier's index (`items_frontier`)
//! with it; the entries of items already drained sit at the front of the
//! index, where every claim-next starts its walk. Until a `VACUUM` removes
//! them, each claim-next steps over all of them, so its cost grows with the
//! items drained since the last one, and autovacuum waits for a fifth of the
//! table to be dead. The webhook outbox is the same: delivered rows are
//! deleted from the front of each subscription's queue, where the next look
//! for its oldest row starts. So an instance vacuums both tables itself
//! every `PAD_PG_VACUUM_EVERY` lease calls and finished deliveries, indexes
//! included, on a connection of its own, one at a time, pausing longer
//! after a longer one.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use pad_store::StoreResult;
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use tokio::sync::watch;

/// Lease calls between two vacuums unless `PAD_PG_VACUUM_EVERY` says
/// otherwise: about 2 000 drained items (a claim and an end each).
pub(crate) const DEFAULT_VACUUM_EVERY: u64 = 4000;

/// After a vacuum that took `t`, the next waits at least `PAUSE × t`: a
/// vacuum reads the table's indexes whole, which takes longer the larger
/// the table, so on a large one they come further apart and never take more
/// than a twentieth of the time.
const PAUSE: u32 = 19;

/// `INDEX_CLEANUP ON`: a vacuum may otherwise leave the indexes as they are
/// when few of the table's pages changed, which on a large table is always
/// the case between two of these. `TRUNCATE OFF`: giving empty pages at the
/// table's end back to the system takes a lock that stops every read.
/// No `SKIP_LOCKED`: a vacuum already running is waited for (PostgreSQL
/// cancels autovacuum's after a second), so when this one ends the entries
/// are gone.
const VACUUM: &str = "VACUUM (INDEX_CLEANUP ON, TRUNCATE OFF) items, webhook_outbox";

pub(crate) struct Vacuum {
    opts: PgConnectOptions,
    state: Mutex<State>,
    /// Vacuums finished, and of those failed, for tests.
    finished: watch::Sender<(u64, u64)>,
}

struct State {
    /// 0: never.
    every: u64,
    /// Lease calls since the last vacuum started.
    calls: u64,
    running: bool,
    not_before: Option<Instant>,
}

impl State {
    /// Counts a call made at `now`; whether it starts a vacuum: `every`
    /// calls since the last one started, that one ended and its pause
    /// passed.
    fn call(&mut self, now: Instant) -> bool {
        self.calls += 1;
        let start =
            self.every > 0 && self.calls >= self.every && !self.running && self.not_before.is_none_or(|t| now >= t);
        if start {
            (self.calls, self.running) = (0, true);
        }
        start
    }

    /// A vacuum that started at `started` ended at `now`.
    fn ended(&mut self, started: Instant, now: Instant) {
        self.running = false;
        self.not_before = Some(now + now.saturating_duration_since(started) * PAUSE);
    }
}

impl Vacuum {
    pub(crate) fn new(opts: PgConnectOptions, every: u64) -> Arc<Self> {
        let state = State { every, calls: 0, running: false, not_before: None };
        Arc::new(Vacuum { opts, state: Mutex::new(state), finished: watch::channel((0, 0)).0 })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing panics while the lock is held; recover the data if it ever did.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts a lease call, and starts a vacuum once `every` have been made
    /// since the last one started, unless that one still runs or its pause
    /// has not passed (a later call then starts it).
    pub(crate) fn count(self: &Arc<Self>) {
        if self.state().call(Instant::now()) {
            tokio::spawn(Arc::clone(self).run());
        }
    }

    async fn run(self: Arc<Self>) {
        // Marks the vacuum ended even if its task is dropped half-way (the
        // runtime shutting down), so the instance is never left unable to
        // start another.
        struct Running(Arc<Vacuum>, Instant, bool);
        impl Drop for Running {
            fn drop(&mut self) {
                let Running(vacuum, started, failed) = self;
                vacuum.state().ended(*started, Instant::now());
                vacuum.finished.send_modify(|(done, failures)| {
                    *done += 1;
                    *failures += u64::from(*failed);
                });
            }
        }
        let mut running = Running(Arc::clone(&self), Instant::now(), true);
        let vacuumed = async {
            let mut conn = PgConnection::connect_with(&self.opts).await?;
            sqlx::raw_sql(VACUUM).execute(&mut conn).await?;
            conn.close().await
        };
        match vacuumed.await {
            Ok(()) => running.2 = false,
            // Nothing is lost: the next one, or autovacuum, clears the entries.
            Err(e) => tracing::warn!(error = %e, "long drains: cannot vacuum the items table and the webhook outbox"),
        }
    }

    /// Vacuums every `every` lease calls from now on (0: never).
    pub(crate) fn set_every(&self, every: u64) {
        let mut s = self.state();
        (s.every, s.calls) = (every, 0);
    }

    /// Waits until `n` vacuums have finished; how many of all finished failed.
    pub(crate) async fn finished(&self, n: u64) -> u64 {
        let mut rx = self.finished.subscribe();
        // The sender lives as long as `self`.
        rx.wait_for(|(done, _)| *done >= n).await.map_or(0, |v| v.1)
    }
}

/// `PAD_PG_VACUUM_EVERY`: a count of lease calls, 0 to leave vacuuming to
/// autovacuum.
pub(crate) fn every_from_env() -> StoreResult<u64> {
    crate::number_from_env(EVERY, DEFAULT_VACUUM_EVERY, 0)
}

const EVERY: &str = "PAD_PG_VACUUM_EVERY";

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    #[test]
    fn a_vacuum_starts_every_so_many_calls_one_at_a_time_after_its_pause() {
        let t0 = Instant::now();
        let mut s = super::State { every: 3, calls: 0, running: false, not_before: None };
        let starts: Vec<bool> = (0..3).map(|_| s.call(t0)).collect();
        assert_eq!(starts, [false, false, true], "the third call starts one");
        assert!((0..5).all(|_| !s.call(t0)), "none while it runs");
        // It took a second: the next waits 19 more, however many calls come.
        let end = t0 + Duration::from_secs(1);
        s.ended(t0, end);
        assert!(!s.call(end + Duration::from_secs(18)), "{} calls, but within the pause", s.calls);
        assert!(s.call(end + Duration::from_secs(19)), "the first call after the pause starts one");
        assert_eq!(s.calls, 0);
        let mut never = super::State { every: 0, calls: 0, running: false, not_before: None };
        assert!((0..10_000).all(|_| !never.call(t0)), "0: never");
    }

    #[test]
    fn the_vacuum_interval_is_a_count_and_0_turns_it_off() {
        let parse = |v| crate::parse_number::<u64>(super::EVERY, v, 0);
        assert_eq!(parse("4000").unwrap(), 4000);
        assert_eq!(parse("0").unwrap(), 0);
        for bad in ["-1", "1.5", "often", ""] {
            let e = parse(bad).unwrap_err();
            assert!(e.to_string().contains("PAD_PG_VACUUM_EVERY"), "{bad}: {e}");
        }
    }
}
