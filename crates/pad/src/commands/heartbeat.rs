//! Keeping a lease alive while a command runs, for `pad run`, `pad drain`
//! and `pad guard`, with S2 — the holder stops first (docs/leases.md,
//! "S2: the holder stops first"; the rule itself is `pad_core::stop`).

use std::time::Duration;

use pad_client::Client;
use pad_core::api::RenewBody;
use pad_core::{ItemRef, Lease, stop};
use tokio::time::{Instant, sleep_until, timeout_at};

use crate::error::{CliError, EXIT_CONFLICT, EXIT_UNAVAILABLE};

/// The pause before another try when a renewal could not reach the server.
const RENEW_RETRY: Duration = Duration::from_secs(1);

/// A lease held, and when the request that granted or last renewed it was
/// sent (our clock): the starting point of the conservative count.
pub(super) struct Held<'a> {
    pub client: &'a Client,
    pub ws: &'a str,
    pub item_ref: &'a ItemRef,
    pub lease: &'a Lease,
    pub sent: Instant,
    pub kill_after: Duration,
}

/// Refuses (exit 2) a TTL / `--kill-after` pair that leaves no room to
/// renew before S2 would have to stop the command.
pub(super) fn check_room(ttl: Duration, kill_after: Duration) -> Result<(), CliError> {
    stop::check_room(ttl, kill_after).map_err(|e| CliError::usage(e.to_string()))
}

/// Renews the lease every third of its TTL for as long as it can, and
/// returns only when the command must be stopped, saying why.
///
/// A refusal (`lease_lost`, `lease_held`, a revoked token) is final. A server
/// out of reach is tried again every second, but only until S2's stop
/// point: `kill_after` plus a margin before the lease could expire, counted
/// from when the last successful renewal was sent. Returning then leaves
/// time to stop the command (SIGTERM, SIGKILL `kill_after` later) before
/// any other worker can be granted the item.
pub(super) async fn keep_alive(h: Held<'_>) -> CliError {
    let r = h.item_ref.to_string();
    let ttl = Duration::from_secs(h.lease.ttl_seconds.into());
    let period = stop::renew_every(ttl);
    let body = RenewBody {
        epoch: Some(h.lease.epoch),
        lease_id: Some(h.lease.lease_id),
        holder: Some(h.lease.holder.clone()),
        ttl_seconds: None,
        note: None,
    };
    let mut stop_at = h.sent + stop::stop_after(stop::time_left(h.lease), ttl, h.kill_after);
    let mut next = h.sent + period;
    let mut failure: Option<String> = None;
    let mut capped = false;
    loop {
        sleep_until(next.min(stop_at)).await;
        if Instant::now() >= stop_at {
            break;
        }
        let sent = Instant::now();
        match timeout_at(stop_at, h.client.renew(h.ws, &r, &body)).await {
            Ok(Ok(answer)) => {
                let left = stop::time_left(&answer.lease);
                // L19: the server says when renewals can no longer extend it.
                capped = answer.capped;
                stop_at = sent + stop::stop_after(left, ttl, h.kill_after);
                next = sent + period;
                if failure.take().is_some() {
                    eprintln!("pad: renewed the lease on {r} again");
                }
            }
            Ok(Err(e)) if e.exit_code() == EXIT_UNAVAILABLE => {
                // One line when renewals start failing, not one per retry.
                if failure.is_none() {
                    eprintln!("pad: could not renew the lease on {r}; retrying until it must stop the command: {e}");
                }
                failure = Some(e.to_string());
                next = Instant::now() + RENEW_RETRY;
            }
            Ok(Err(e)) => return CliError::for_item(h.item_ref, e),
            Err(_stop_point) => {}
        }
    }
    if capped && failure.is_none() {
        return CliError::new(
            EXIT_CONFLICT,
            format!("lease on {r} reached its max hold (L19) and cannot be renewed further"),
        );
    }
    let why = failure.map(|f| format!(" ({f})")).unwrap_or_default();
    CliError::new(
        EXIT_CONFLICT,
        format!(
            "lease on {r} lost: no renewal got through, and the command must be stopped before the lease can expire{why}"
        ),
    )
}
