//! S2 — the holder stops first (docs/leases.md, "S2: the holder stops
//! first"). A supervisor that cannot renew must have its command dead
//! before the lease can have expired on the server, by its own clock, with
//! a margin: then no other worker, granted the item at expiry, can overlap
//! with it.
//!
//! The supervisor counts from when it *sent* its last successful renewal
//! (or the claim): the server started the lease's remaining time later than
//! that, so the count never overestimates how long the lease lives,
//! whatever the two clocks read. From there it must send SIGTERM no later
//! than [`stop_after`], so SIGKILL (`kill_after` later) lands a margin before
//! the conservative expiry.

use std::time::Duration;

/// The least margin: a signal's delivery and a process's reaping, on a busy
/// machine.
pub const MIN_MARGIN: Duration = Duration::from_millis(250);

/// The safety margin for a lease of `ttl`: covers clock-rate drift between
/// the supervisor and the database (1 % of the TTL is far more than any
/// real clock drifts) and signal latency ([`MIN_MARGIN`]), whichever is
/// larger.
pub fn margin(ttl: Duration) -> Duration {
    (ttl / 100).max(MIN_MARGIN)
}

/// How long after sending the last successful renewal the holder must start
/// stopping its command (SIGTERM), given the lease's time left as the
/// server answered it (`expires_at - renewed_at`), the lease's TTL and
/// `kill_after`. `Duration::ZERO` when there is no time left to run at all.
pub fn stop_after(left: Duration, ttl: Duration, kill_after: Duration) -> Duration {
    left.saturating_sub(kill_after + margin(ttl))
}

/// The lease's time left as the server answered a claim or renewal: from
/// `renewed_at` to `expires_at`, both on the store's clock, so no clock of
/// the holder's is compared with it.
pub fn time_left(lease: &crate::Lease) -> Duration {
    (lease.expires_at - lease.renewed_at).to_std().unwrap_or_default()
}

/// When renewals are sent: every third of the TTL.
pub fn renew_every(ttl: Duration) -> Duration {
    ttl / 3
}

/// A `--ttl` / `--kill-after` pair that leaves no room to renew: the
/// command would have to be stopped before the first renewal is even due.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a lease of {ttl:?} leaves no room to renew with --kill-after {kill_after:?}: the command must be \
     dead {margin:?} before the lease can expire, so SIGTERM would come before the first renewal \
     (due after a third of the TTL); use a longer --ttl or a shorter --kill-after (docs/leases.md, S2)"
)]
pub struct NoRoom {
    pub ttl: Duration,
    pub kill_after: Duration,
    pub margin: Duration,
}

/// Refuses a pair whose stop point does not come after the first renewal
/// is due: a renewal must have a chance, and a retry too.
pub fn check_room(ttl: Duration, kill_after: Duration) -> Result<(), NoRoom> {
    if stop_after(ttl, ttl, kill_after) > renew_every(ttl) {
        Ok(())
    } else {
        Err(NoRoom { ttl, kill_after, margin: margin(ttl) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_examples_in_the_docs() {
        let s = Duration::from_secs;
        assert_eq!(margin(s(8)), Duration::from_millis(250));
        assert_eq!(margin(s(900)), s(9));
        assert_eq!(stop_after(s(8), s(8), s(2)), Duration::from_millis(5750));
        assert!(check_room(s(8), s(2)).is_ok());
        assert!(check_room(s(900), s(10)).is_ok());
        assert!(check_room(s(10), s(10)).is_err());
        assert!(check_room(s(3), s(2)).is_err());
        assert_eq!(stop_after(s(1), s(60), s(10)), Duration::ZERO);
    }

    proptest! {
        /// Whatever the numbers, SIGKILL lands at least the margin before the
        /// conservative expiry: stop + kill_after + margin <= left.
        #[test]
        fn the_group_is_dead_before_the_lease_can_expire(
            left_ms in 0_u64..10_000_000, ttl_ms in 1_000_u64..10_000_000, kill_ms in 0_u64..1_000_000,
        ) {
            let (left, ttl, kill) =
                (Duration::from_millis(left_ms), Duration::from_millis(ttl_ms), Duration::from_millis(kill_ms));
            let stop = stop_after(left, ttl, kill);
            if stop > Duration::ZERO {
                prop_assert!(stop + kill + margin(ttl) <= left);
            }
            prop_assert!(stop <= left);
            prop_assert!(margin(ttl) >= MIN_MARGIN);
        }

        /// An accepted pair always leaves the first renewal due before the stop.
        #[test]
        fn an_accepted_pair_renews_before_it_stops(ttl_ms in 1_000_u64..10_000_000, kill_ms in 0_u64..1_000_000) {
            let (ttl, kill) = (Duration::from_millis(ttl_ms), Duration::from_millis(kill_ms));
            if check_room(ttl, kill).is_ok() {
                prop_assert!(renew_every(ttl) < stop_after(ttl, ttl, kill));
                prop_assert!(renew_every(ttl) + kill + margin(ttl) < ttl);
            }
        }

        /// A longer time left never means stopping earlier.
        #[test]
        fn stop_is_monotonic_in_time_left(a in 0_u64..1_000_000, b in 0_u64..1_000_000, ttl_ms in 1_000_u64..1_000_000) {
            let (lo, hi) = (a.min(b), a.max(b));
            let ttl = Duration::from_millis(ttl_ms);
            let k = Duration::from_secs(1);
            prop_assert!(stop_after(Duration::from_millis(lo), ttl, k) <= stop_after(Duration::from_millis(hi), ttl, k));
        }
    }
}
