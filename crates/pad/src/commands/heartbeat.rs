//! Keeping leases alive while commands run, for `pad run`, `pad drain` and
//! `pad guard`, with S2 — the holder stops first (docs/leases.md, "S2: the
//! holder stops first"; the rule itself is `pad_core::stop`).
//!
//! One [`Heartbeat`] serves every lease of a supervisor: a drain running N
//! jobs renews all of their leases together, in one request, rather than
//! sending N (docs/leases.md, "Draining", `--jobs`). Each lease still keeps
//! its own S2 count and is lost or renewed on its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pad_client::{Client, ClientError};
use pad_core::api::{RenewBody, RenewEntry, RenewLeasesBody, RenewResult};
use pad_core::{ItemRef, Lease, stop};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until, timeout_at};

use crate::commands::outage::passes;
use crate::error::{CliError, Exit};

/// The pause before another try when a renewal could not reach the server,
/// unless the server asked for a longer one.
const RENEW_RETRY: Duration = Duration::from_secs(1);

/// How long to wait before renewing again after `e`: the server's
/// `Retry-After` (`rate_limited`, `unavailable`; docs/api.md, "Limits"),
/// never less than `RENEW_RETRY`. S2 still bounds the wait: a lease whose
/// stop point comes first is lost then.
fn retry_pause(retry_after: Option<Duration>) -> Duration {
    retry_after.map_or(RENEW_RETRY, |asked| asked.max(RENEW_RETRY))
}

/// Refuses (exit 2) a TTL / `--kill-after` pair that leaves no room to
/// renew before S2 would have to stop the command.
pub(super) fn check_room(ttl: Duration, kill_after: Duration) -> Result<(), CliError> {
    stop::check_room(ttl, kill_after).map_err(|e| CliError::usage(e.to_string()))
}

/// The renewals of one supervisor's leases, run by a task of their own
/// until this is dropped.
pub(super) struct Heartbeat {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
    /// For [`Heartbeat::renew_late`]; the task has its own.
    client: Client,
    ws: String,
}

/// A lease as the request that granted or last renewed it left it: the
/// server's answer, and when that request was sent (our clock), S2's
/// starting point.
pub(super) struct Fresh<'a> {
    pub item_ref: &'a ItemRef,
    pub lease: &'a mut Lease,
    pub sent: &'a mut Instant,
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A lease the heartbeat keeps alive, until this is dropped (the item is
/// over: renewals of it stop, and one in flight is ignored).
pub(super) struct Holding {
    id: u64,
    shared: Arc<Shared>,
    lost: oneshot::Receiver<CliError>,
}

impl Holding {
    /// Returns only when the command must be stopped, saying why.
    ///
    /// A refusal (`lease_lost`, `lease_held`, a revoked token) is final. A
    /// server out of reach, or asking for a pause (`rate_limited`), is tried
    /// again every second or after its `Retry-After`, but only until S2's
    /// stop point: `kill_after` plus a margin before the lease could expire,
    /// counted from when the last successful renewal was sent. Returning then
    /// leaves time to stop the command (SIGTERM, SIGKILL `kill_after` later)
    /// before any other worker can be granted the item.
    pub async fn lost(&mut self) -> CliError {
        match (&mut self.lost).await {
            Ok(e) => e,
            // The heartbeat is gone with the supervisor: nothing to report.
            Err(_) => std::future::pending().await,
        }
    }

    /// When SIGKILL must reach the command at the latest, if pad starts
    /// stopping it `now`: `kill_after` after `now`, or after S2's stop point
    /// if that came first (a loss handled late, or a clean exit racing it),
    /// so the group is dead before the lease can expire (docs/leases.md, "S2:
    /// the holder stops first").
    pub fn kill_by(&self, now: Instant) -> Instant {
        let state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let stop_at = state.leases.get(&self.id).map_or(now, |e| e.stop_at);
        now.min(stop_at) + self.shared.kill_after
    }

    /// Until when, by our clock, the lease can still be live on the server:
    /// its conservative expiry (counted as S2's stop point is, from when the
    /// last renewal that got through was sent) less S2's margin; now, once a
    /// renewal was refused. A job whose command has ended records its
    /// outcome until then at the latest (docs/leases.md, "Draining").
    pub fn live_until(&self) -> Instant {
        let state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        state.leases.get(&self.id).map_or_else(Instant::now, |e| {
            let margin = stop::margin(e.ttl);
            e.expires.checked_sub(margin).unwrap_or(e.expires)
        })
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner()).leases.remove(&self.id);
    }
}

struct Shared {
    kill_after: Duration,
    state: Mutex<State>,
    /// A lease was added: the task looks again when the next renewal is due.
    added: Notify,
}

#[derive(Default)]
struct State {
    next_id: u64,
    leases: HashMap<u64, Entry>,
}

/// One lease's renewal state: S2's count, per lease. A lost lease keeps its
/// entry, no longer renewed, until its [`Holding`] is dropped: its stop point
/// still bounds when SIGKILL is due ([`Holding::kill_by`]).
struct Entry {
    item_ref: ItemRef,
    body: RenewBody,
    ttl: Duration,
    /// When the command must start stopping (S2), by our clock; once lost,
    /// when it should have.
    stop_at: Instant,
    /// The lease's conservative expiry, by our clock (S2); now, once refused.
    expires: Instant,
    /// When the next renewal is due: a third of the TTL after the last one.
    next: Instant,
    /// Why the last renewals did not get through, while they do not.
    failure: Option<String>,
    /// L19: the server said renewals can no longer extend the lease.
    capped: bool,
    /// `None` once the loss was sent.
    lost: Option<oneshot::Sender<CliError>>,
}

impl Entry {
    /// Still renewed: not lost.
    fn live(&self) -> bool {
        self.lost.is_some()
    }

    /// The stop point passed: S2's words for why the command is stopped.
    fn s2_loss(&self) -> CliError {
        let r = &self.item_ref;
        if self.capped && self.failure.is_none() {
            return CliError::new(
                Exit::Conflict,
                format!("lease on {r} reached its max hold (L19) and cannot be renewed further"),
            );
        }
        let why = self.failure.as_ref().map(|f| format!(" ({f})")).unwrap_or_default();
        CliError::new(
            Exit::Conflict,
            format!(
                "lease on {r} lost: no renewal got through, and the command must be stopped before the lease can \
                 expire{why}"
            ),
        )
    }
}

/// What a renewal request said about one lease.
enum Renewed {
    Ok {
        lease: Lease,
        capped: bool,
    },
    /// The server could not be reached, or asked for a pause (exit-8
    /// class): try again, after `Retry-After` when it gave one.
    Unreachable {
        why: String,
        retry_after: Option<Duration>,
    },
    /// Refused: final.
    Refused(CliError),
}

impl Heartbeat {
    pub fn start(client: Client, ws: String, kill_after: Duration) -> Heartbeat {
        let shared = Arc::new(Shared { kill_after, state: Mutex::default(), added: Notify::new() });
        let task = tokio::spawn(beat(Arc::clone(&shared), client.clone(), ws.clone()));
        Heartbeat { shared, task, client, ws }
    }

    /// Renews, in one request, every lease of `leases` whose renewal is
    /// already due: a grant that a long poll answered long after it was
    /// sent (docs/leases.md, S2: "A grant that arrives late"). S2 counts from
    /// when the granting request was sent, so such a grant may leave no time
    /// to run, or none at all; renewed, it is counted from this renewal's
    /// send instead, and its `lease` and `sent` say so. Nothing is run on
    /// these leases meanwhile, so the renewal may take as long as it takes.
    ///
    /// Returns, per lease, why it must not be run, if it must not: the
    /// renewal was refused (the lease is not ours: nothing to end), or did
    /// not get through and the lease's stop point has passed. A lease not
    /// late, or not renewed but still short of its stop point, may run; the
    /// heartbeat renews it from then on.
    pub async fn renew_late(&self, leases: &mut [Fresh<'_>]) -> Vec<Option<CliError>> {
        let kill_after = self.shared.kill_after;
        let ttl = |l: &Lease| Duration::from_secs(l.ttl_seconds.into());
        let stop_at = |f: &Fresh<'_>| stop_point(*f.sent, f.lease, ttl(f.lease), kill_after);
        let now = Instant::now();
        let late: Vec<usize> =
            (0..leases.len()).filter(|&i| now >= *leases[i].sent + stop::renew_every(ttl(leases[i].lease))).collect();
        let mut lost: Vec<Option<CliError>> = leases.iter().map(|_| None).collect();
        if late.is_empty() {
            return lost;
        }
        let batch: Vec<(u64, ItemRef, RenewBody)> =
            late.iter().map(|&i| (0, leases[i].item_ref.clone(), renew_body(leases[i].lease))).collect();
        let sent = Instant::now();
        let answers = renew_all(&self.client, &self.ws, &batch).await;
        for (&i, answer) in late.iter().zip(answers) {
            let f = &mut leases[i];
            match answer {
                Renewed::Ok { lease, .. } => {
                    *f.lease = lease;
                    *f.sent = sent;
                }
                Renewed::Unreachable { .. } if Instant::now() < stop_at(f) => {}
                Renewed::Unreachable { why, .. } => {
                    lost[i] = Some(CliError::new(
                        Exit::Conflict,
                        format!(
                            "lease on {} granted too late to run on, and no renewal got through before it had to \
                             stop ({why})",
                            f.item_ref
                        ),
                    ));
                }
                Renewed::Refused(e) => lost[i] = Some(e),
            }
        }
        lost
    }

    /// Keeps `lease` on `item_ref` alive from now on; `sent` is when the
    /// request that granted or last renewed it was sent (our clock): the
    /// starting point of the conservative count.
    pub fn hold(&self, item_ref: &ItemRef, lease: &Lease, sent: Instant) -> Holding {
        let kill_after = self.shared.kill_after;
        let ttl = Duration::from_secs(lease.ttl_seconds.into());
        let (tx, rx) = oneshot::channel();
        let entry = Entry {
            item_ref: item_ref.clone(),
            body: renew_body(lease),
            ttl,
            stop_at: stop_point(sent, lease, ttl, kill_after),
            expires: sent + stop::time_left(lease),
            next: sent + stop::renew_every(ttl),
            failure: None,
            capped: false,
            lost: Some(tx),
        };
        let id = {
            let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
            state.next_id += 1;
            let id = state.next_id;
            state.leases.insert(id, entry);
            id
        };
        self.shared.added.notify_one();
        Holding { id, shared: Arc::clone(&self.shared), lost: rx }
    }
}

/// S2's stop point, by our clock, of `lease` as the request sent at `sent`
/// left it: the one home of that count for a grant, a late grant's renewal
/// and the heartbeat's renewals (docs/leases.md, S2).
fn stop_point(sent: Instant, lease: &Lease, ttl: Duration, kill_after: Duration) -> Instant {
    sent + stop::stop_after(stop::time_left(lease), ttl, kill_after)
}

/// The renewal of `lease`, fenced by its epoch and lease id.
fn renew_body(lease: &Lease) -> RenewBody {
    RenewBody {
        epoch: Some(lease.epoch),
        lease_id: Some(lease.lease_id),
        holder: Some(lease.holder.clone()),
        ttl_seconds: None,
        note: None,
    }
}

/// The heartbeat's task: sleeps until a lease's renewal or stop point is
/// due; then tells those past their stop point that they are lost, and
/// renews every other lease in one request — a lease renewed a little early
/// loses nothing, and the leases of a supervisor's jobs fall into step, so
/// N jobs cost one request per third of a TTL, not N.
async fn beat(shared: Arc<Shared>, client: Client, ws: String) {
    let kill_after = shared.kill_after;
    loop {
        let added = shared.added.notified();
        let wake = {
            let state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            state.leases.values().filter(|e| e.live()).map(|e| e.next.min(e.stop_at)).min()
        };
        match wake {
            Some(at) => {
                tokio::select! {
                    () = sleep_until(at) => {}
                    () = added => continue,
                }
            }
            None => {
                added.await;
                continue;
            }
        }
        let (batch, deadline) = {
            let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            for e in state.leases.values_mut().filter(|e| now >= e.stop_at) {
                if let Some(tx) = e.lost.take() {
                    let _ = tx.send(e.s2_loss());
                }
            }
            if !state.leases.values().any(|e| e.live() && now >= e.next) {
                continue;
            }
            let live = || state.leases.iter().filter(|(_, e)| e.live());
            let batch: Vec<(u64, ItemRef, RenewBody)> =
                live().map(|(id, e)| (*id, e.item_ref.clone(), e.body.clone())).collect();
            (batch, live().map(|(_, e)| e.stop_at).min())
        };
        let Some(deadline) = deadline else { continue };
        let sent = Instant::now();
        // A request still unanswered at the first stop point is given up:
        // that lease is lost at the top of the loop, the others are sent again.
        let Ok(answers) = timeout_at(deadline, renew_all(&client, &ws, &batch)).await else { continue };
        let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        for ((id, r, _), answer) in batch.iter().zip(answers) {
            // Dropped meanwhile: the item is over.
            let Some(e) = state.leases.get_mut(id) else { continue };
            match answer {
                Renewed::Ok { lease, capped } => {
                    e.capped = capped;
                    e.stop_at = stop_point(sent, &lease, e.ttl, kill_after);
                    e.expires = sent + stop::time_left(&lease);
                    e.next = sent + stop::renew_every(e.ttl);
                    if e.failure.take().is_some() {
                        eprintln!("pad: renewed the lease on {r} again");
                    }
                }
                Renewed::Unreachable { why, retry_after } => {
                    // One line when renewals start failing, not one per retry.
                    if e.failure.is_none() {
                        eprintln!(
                            "pad: could not renew the lease on {r}; retrying until it must stop the command: {why}"
                        );
                    }
                    e.failure = Some(why);
                    e.next = Instant::now() + retry_pause(retry_after);
                }
                Renewed::Refused(err) => {
                    if let Some(tx) = e.lost.take() {
                        let _ = tx.send(err);
                    }
                    // A refusal stops the command at once: the lease is not ours.
                    e.stop_at = e.stop_at.min(Instant::now());
                    e.expires = e.expires.min(Instant::now());
                }
            }
        }
    }
}

/// Renews every lease of `batch` in one request (`POST …/leases/renew`),
/// each answered on its own. A drain holds at most `JOBS_MAX` leases, which
/// one request can carry (`RENEW_LEASES_MAX`).
async fn renew_all(client: &Client, ws: &str, batch: &[(u64, ItemRef, RenewBody)]) -> Vec<Renewed> {
    let body = RenewLeasesBody {
        leases: batch
            .iter()
            .map(|(_, r, b)| RenewEntry {
                item_ref: r.to_string(),
                epoch: b.epoch,
                lease_id: b.lease_id,
                holder: b.holder.clone(),
                ttl_seconds: b.ttl_seconds,
                note: b.note.clone(),
            })
            .collect(),
    };
    let answer = match client.renew_leases(ws, &body).await {
        Ok(answer) => answer,
        Err(e) if passes(&e) => {
            let retry_after = e.retry_after();
            return batch.iter().map(|_| Renewed::Unreachable { why: e.to_string(), retry_after }).collect();
        }
        Err(e) => {
            return batch
                .iter()
                .map(|(_, r, _)| {
                    Renewed::Refused(CliError::reworded(&e, format!("could not renew the lease on {r}: {e}")))
                })
                .collect();
        }
    };
    let mut results = answer.results.into_iter();
    batch
        .iter()
        .map(|(_, r, _)| match results.next() {
            Some(RenewResult { lease: Some(lease), capped, .. }) => Renewed::Ok { lease, capped },
            Some(RenewResult { error: Some(e), .. }) => {
                let e = ClientError::Api {
                    status: e.code.http_status(),
                    code: e.code,
                    message: e.message,
                    details: e.details,
                    retry_after: None,
                };
                if passes(&e) {
                    Renewed::Unreachable { why: e.to_string(), retry_after: None }
                } else {
                    Renewed::Refused(CliError::for_item(r, e))
                }
            }
            // An answer short of a result: this lease's renewal did not get through.
            _ => {
                Renewed::Unreachable { why: format!("the server's answer named no result for {r}"), retry_after: None }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::mpsc;

    use super::*;

    /// A server that answers every request `429 rate_limited` with
    /// `Retry-After: {secs}`, and sends a signal per request it saw.
    fn rate_limiting_server(secs: u64) -> (String, mpsc::Receiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (seen, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut buf = Vec::new();
                let mut chunk = [0_u8; 4096];
                // The head, then the body its Content-Length announces.
                let line = loop {
                    let Ok(n) = conn.read(&mut chunk) else { break None };
                    if n == 0 {
                        break None;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
                    let head = String::from_utf8_lossy(&buf[..end]).to_string();
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length").then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + len {
                        break head.lines().next().map(str::to_string);
                    }
                };
                let Some(line) = line else { continue };
                let body = r#"{"error":{"code":"rate_limited","message":"slow down","details":{}}}"#;
                let answer = format!(
                    "HTTP/1.1 429 Too Many Requests\r\nRetry-After: {secs}\r\nContent-Type: application/json\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes());
                if seen.send(line).is_err() {
                    return;
                }
            }
        });
        (url, rx)
    }

    #[test]
    fn the_pause_is_retry_after_and_at_least_a_second() {
        assert_eq!(retry_pause(None), RENEW_RETRY);
        assert_eq!(retry_pause(Some(Duration::from_secs(7))), Duration::from_secs(7));
        assert_eq!(retry_pause(Some(Duration::ZERO)), RENEW_RETRY);
    }

    /// A rate-limited renewal is tried again after the server's
    /// `Retry-After`, not every second: counted in requests seen within a
    /// window shorter than the pause, so a slow machine cannot fail it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_rate_limited_renewal_waits_as_long_as_retry_after_says() {
        const RETRY_AFTER: u64 = 6;
        let (url, seen) = rate_limiting_server(RETRY_AFTER);
        let client = Client::new(pad_client::Url::parse(&url).unwrap(), "token").unwrap();
        let heartbeat = Heartbeat::start(client, "ws".into(), Duration::from_secs(1));
        let lease: Lease = serde_json::from_value(serde_json::json!({
            "holder": "w", "session_id": null, "epoch": 1, "lease_id": 1, "ttl_seconds": 300,
            "acquired_at": "2026-01-01T00:00:00Z", "renewed_at": "2026-01-01T00:00:00Z",
            "expires_at": "2026-01-01T00:05:00Z"
        }))
        .unwrap();
        // Granted a third of the TTL ago: the first renewal is due now, and
        // S2's stop point is minutes away.
        let sent = Instant::now().checked_sub(Duration::from_secs(100)).unwrap();
        let _holding = heartbeat.hold(&"TASK-1".parse().unwrap(), &lease, sent);

        let wait = |d: Duration| {
            let seen = &seen;
            tokio::task::block_in_place(move || seen.recv_timeout(d))
        };
        let first = wait(Duration::from_secs(60)).expect("the first renewal");
        assert!(first.starts_with("POST ") && first.contains("/leases/renew"), "{first}");
        // Retrying every second would send two or three more here.
        let window = Duration::from_secs(RETRY_AFTER / 2);
        assert_eq!(wait(window).ok(), None, "a renewal sent before Retry-After had passed");
        // And it does try again once the pause is over.
        wait(Duration::from_secs(60)).expect("a renewal after Retry-After");
    }
}
