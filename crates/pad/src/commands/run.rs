//! `pad run` and `pad drain` (SPEC §5): a command run under an item's lease.
//!
//! Both come down to one supervisor, [`supervise`]. Given a fresh lease it
//! starts CMD with the lease in its environment, keeps the lease alive (a
//! renewal every third of the TTL, fenced by the epoch), passes Ctrl-C and
//! SIGTERM on to CMD, and once CMD exits marks the item done (if asked) and
//! releases the lease. If the lease is lost under CMD — it expired while the
//! server was out of reach, or an owner broke it — CMD gets SIGTERM: another
//! worker may already hold the item, and two workers on one item is exactly
//! what the lease exists to prevent.
//!
//! Exit codes. `pad run`: CMD's own (128 + N when signal N ended it); 7 when
//! the lease could not be taken or was lost (CMD stopped); the usual codes
//! for other failures before CMD starts, and 127/126 when it cannot be
//! started. `pad drain`: 0 once nothing is ready or `--max` items have run,
//! whatever CMD's exit codes — a failed item is released, not marked done,
//! and the drain moves on (the summary counts it); 128 + N when signal N
//! stopped it (after the current CMD exited and its lease was released);
//! with `--once`, like `pad run` on the item it ran, or 5 when none was ready.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use pad_client::Client;
use pad_core::api::{ClaimBody, ClaimNextBody, FrontierQuery, ReleaseBody, RenewBody};
use pad_core::{FrontierFilter, ItemPatch, ItemRef, Lease, Status};
use tokio::process::{Child, Command};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::time::{Instant, sleep_until, timeout, timeout_at};

use super::lease::{filter, frontier_query, handoff_line};
use super::{Ctx, about};
use crate::cli::{DrainArgs, RunArgs, WorkerArgs};
use crate::error::{CliError, EXIT_NOT_FOUND};

/// How long CMD has to exit after the SIGTERM that follows a lost lease,
/// before it is killed: it must not go on working on someone else's item.
const KILL_GRACE: Duration = Duration::from_secs(10);
/// The pause before another try when a renewal could not reach the server.
const RENEW_RETRY: Duration = Duration::from_secs(1);
/// `lease_held`, `lease_lost`: a renewal or a fenced write refused for good.
const EXIT_CONFLICT: i32 = 7;
/// `unavailable`, `rate_limited`: worth another try while the lease lasts.
const EXIT_UNAVAILABLE: i32 = 8;

pub async fn run(ctx: &Ctx, a: RunArgs) -> Result<(), CliError> {
    let mut signals = Signals::catch()?;
    let worker = Worker::new(ctx, a.worker)?;
    let r = a.item.item_ref;
    let body = ClaimBody {
        holder: worker.holder.clone(),
        session_id: Some(a.session.unwrap_or_else(new_session_id)),
        ttl_seconds: worker.ttl_seconds.map(Into::into),
        note: a.note,
        refresh: None,
    };
    let at = Instant::now();
    let claimed = worker.client.claim(worker.ws, &r.to_string(), &body).await.map_err(about(&r))?;
    announce_handoff(claimed.previous_holder.as_deref(), claimed.previous_note.as_deref());
    match supervise(&worker, Granted { item_ref: r, lease: claimed.lease, at }, &mut signals).await? {
        Ran::Exited { code: 0 } => Ok(()),
        Ran::Exited { code } => Err(CliError::Exit(code)),
        Ran::LeaseLost(e) => Err(e),
    }
}

pub async fn drain(ctx: &Ctx, a: DrainArgs) -> Result<(), CliError> {
    let mut signals = Signals::catch()?;
    let worker = Worker::new(ctx, a.worker)?;
    let filter = filter(a.filter);
    let max = if a.once { Some(1) } else { a.max };
    let mut progress = Progress::new(std::io::stderr().is_terminal());
    let mut last: Option<Result<i32, CliError>> = None;
    let mut seen = HashSet::new();
    let stopped = loop {
        if max.is_some_and(|max| progress.total() >= max) || signals.pending().await.is_some() {
            break Ok(());
        }
        let granted = match next_item(&worker, &filter, &seen).await {
            Ok(Some(granted)) => granted,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        };
        let r = granted.item_ref.clone();
        seen.insert(r.clone());
        progress.start(&r);
        let outcome = match supervise(&worker, granted, &mut signals).await {
            Ok(Ran::Exited { code }) => Ok(code),
            Ok(Ran::LeaseLost(e)) => Err(e),
            // CMD could not start, or the server refused something that
            // will not get better with the next item: stop here.
            Err(e) => break Err(e),
        };
        progress.finish(&r, &outcome);
        last = Some(outcome);
    };
    progress.summary();
    stopped?;
    match (a.once, last, signals.received) {
        (_, _, Some(sig)) => Err(CliError::Exit(128 + sig)),
        (true, None, None) => {
            eprintln!("No ready item");
            Err(CliError::Exit(EXIT_NOT_FOUND))
        }
        (true, Some(Ok(code)), None) if code != 0 => Err(CliError::Exit(code)),
        (true, Some(Err(e)), None) => Err(e),
        _ => Ok(()),
    }
}

/// Claims the best ready item this drain has not run yet.
///
/// An item the drain already ran is back in the frontier when CMD failed (it
/// was released, not closed) or succeeded without closing it; claim-next
/// would hand it out again and again. So each item runs at most once per
/// drain: when claim-next offers one already run, it is given back and the
/// first claimable item further down the frontier is taken instead.
async fn next_item(
    w: &Worker<'_>,
    filter: &FrontierFilter,
    seen: &HashSet<ItemRef>,
) -> Result<Option<Granted>, CliError> {
    // A session per item: each run is its own, in the events and in what the
    // next claimant is told.
    let session_id = Some(new_session_id());
    let ttl_seconds = w.ttl_seconds.map(Into::into);
    let body = ClaimNextBody {
        filter: filter.clone(),
        holder: w.holder.clone(),
        session_id: session_id.clone(),
        ttl_seconds: ttl_seconds.clone(),
        note: None,
    };
    let at = Instant::now();
    let next = w.client.claim_next(w.ws, &body).await?;
    let (Some(item), Some(lease)) = (next.item, next.lease) else { return Ok(None) };
    announce_handoff(next.previous_holder.as_deref(), next.previous_note.as_deref());
    let granted = Granted { item_ref: item.item_ref, lease, at };
    if !seen.contains(&granted.item_ref) {
        return Ok(Some(granted));
    }
    release(w, &granted).await;
    let query = FrontierQuery { limit: Some(pad_core::LIST_LIMIT_MAX), ..frontier_query(filter) };
    let candidates = w.client.frontier(w.ws, &query).await?.items;
    for item in candidates.into_iter().filter(|i| !seen.contains(&i.item_ref)) {
        let body = ClaimBody {
            holder: w.holder.clone(),
            session_id: session_id.clone(),
            ttl_seconds: ttl_seconds.clone(),
            note: None,
            refresh: None,
        };
        let at = Instant::now();
        match w.client.claim(w.ws, &item.item_ref.to_string(), &body).await {
            Ok(claimed) => {
                announce_handoff(claimed.previous_holder.as_deref(), claimed.previous_note.as_deref());
                return Ok(Some(Granted { item_ref: item.item_ref, lease: claimed.lease, at }));
            }
            // Another worker got there first: on to the next one.
            Err(e) if e.held_lease().is_some() => {}
            Err(e) => return Err(CliError::for_item(&item.item_ref, e)),
        }
    }
    Ok(None)
}

/// The previous holder's note (L12), for the person watching.
fn announce_handoff(holder: Option<&str>, note: Option<&str>) {
    if let Some(line) = handoff_line(holder, note) {
        eprint!("pad: {line}");
    }
}

/// What `run` and `drain` share: the server, who works, and on what.
struct Worker<'a> {
    client: Client,
    ws: &'a str,
    /// `None` lets the server name the caller (its email).
    holder: Option<String>,
    ttl_seconds: Option<u64>,
    done_on_success: bool,
    command: Vec<OsString>,
}

impl<'a> Worker<'a> {
    fn new(ctx: &'a Ctx, a: WorkerArgs) -> Result<Self, CliError> {
        Ok(Worker {
            client: ctx.client()?,
            ws: ctx.ws(),
            holder: a.holder.holder,
            ttl_seconds: a.ttl.seconds(),
            done_on_success: a.done_on_success,
            command: a.command,
        })
    }
}

/// A lease just granted, and when: the supervisor's starting point.
struct Granted {
    item_ref: ItemRef,
    lease: Lease,
    /// Our clock just before the request that granted the lease. The server
    /// started the TTL later than this, so `at + ttl` never overestimates how
    /// long the lease lives, whatever the two clocks say.
    at: Instant,
}

enum Ran {
    /// CMD exited with this code (128 + N for signal N); the lease has been
    /// released and, on 0 with `--done-on-success`, the item marked done.
    Exited { code: i32 },
    /// The lease ended under CMD, which was stopped; or the fenced `done`
    /// was refused because the lease was no longer ours.
    LeaseLost(CliError),
}

/// Runs CMD under the granted lease, from start to release.
async fn supervise(w: &Worker<'_>, g: Granted, signals: &mut Signals) -> Result<Ran, CliError> {
    // Ctrl-C while the lease was being taken: give it back, run nothing.
    if let Some(sig) = signals.pending().await {
        release(w, &g).await;
        return Ok(Ran::Exited { code: 128 + sig });
    }
    let mut child = match spawn(&w.command, &g) {
        Ok(child) => child,
        Err(e) => {
            release(w, &g).await;
            return Err(e);
        }
    };
    // Polled beside the child rather than spawned, so it ends (and any
    // renewal in flight is dropped) the moment CMD exits.
    let mut heartbeat = std::pin::pin!(keep_alive(w, &g));
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            loss = &mut heartbeat => {
                stop(&mut child).await?;
                let program = w.command[0].to_string_lossy();
                return Ok(Ran::LeaseLost(with_suffix(loss, &format!("; stopped `{program}`"))));
            }
            sig = signals.recv() => send_signal(&child, sig),
        }
    };
    let code = exit_code(status);
    // An interrupted CMD may well exit 0; that does not make its work done.
    if w.done_on_success && code == 0 && signals.received.is_none() {
        let done = ItemPatch { status: Some(Status::Done), lease_epoch: Some(g.lease.epoch), ..ItemPatch::default() };
        if let Err(e) = w.client.update_item(w.ws, &g.item_ref.to_string(), &done).await {
            let e = CliError::for_item(&g.item_ref, e);
            release(w, &g).await;
            return match e {
                CliError::Failed { code: EXIT_CONFLICT, .. } => {
                    Ok(Ran::LeaseLost(with_suffix(e, "; the item was not marked done")))
                }
                e => Err(e),
            };
        }
    }
    release(w, &g).await;
    Ok(Ran::Exited { code })
}

/// CMD with the lease in its environment (SPEC §5).
fn spawn(command: &[OsString], g: &Granted) -> Result<Child, CliError> {
    let (program, args) = command.split_first().ok_or_else(|| CliError::usage("no command given after --"))?;
    Command::new(program)
        .args(args)
        .env("PAD_REF", g.item_ref.to_string())
        .env("PAD_LEASE_EPOCH", g.lease.epoch.to_string())
        .env("PAD_HOLDER", &g.lease.holder)
        .env("PAD_SESSION_ID", g.lease.session_id.as_deref().unwrap_or_default())
        .spawn()
        .map_err(|e| {
            // The shell's codes for "not found" and "found but not runnable".
            let code = if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 };
            CliError::new(code, format!("cannot run `{}`: {e}", program.to_string_lossy()))
        })
}

/// Renews the lease every third of its TTL for as long as it can, and
/// answers why it could not: it only returns once the lease is lost.
///
/// A refusal (`lease_lost`, `lease_held`, a revoked token) is final. A server
/// out of reach is tried again every second until the lease would have
/// expired by our own conservative reckoning, since a renewal that lands
/// before then still keeps it.
async fn keep_alive(w: &Worker<'_>, g: &Granted) -> CliError {
    let r = g.item_ref.to_string();
    let ttl = Duration::from_secs(g.lease.ttl_seconds.into());
    let period = ttl / 3;
    let body = RenewBody { epoch: Some(g.lease.epoch), holder: Some(g.lease.holder.clone()), ..RenewBody::default() };
    let mut expires = g.at + ttl;
    let mut next = g.at + period;
    let mut failure = None;
    loop {
        sleep_until(next).await;
        let sent = Instant::now();
        match timeout_at(expires, w.client.renew(w.ws, &r, &body)).await {
            Ok(Ok(_)) => {
                (expires, next, failure) = (sent + ttl, sent + period, None);
                continue;
            }
            Ok(Err(e)) if e.exit_code() == EXIT_UNAVAILABLE => {
                eprintln!("pad: could not renew the lease on {r}, will retry: {e}");
                failure = Some(e.to_string());
                next = (Instant::now() + RENEW_RETRY).min(expires);
            }
            Ok(Err(e)) => return CliError::for_item(&g.item_ref, e),
            Err(_elapsed) => {}
        }
        if Instant::now() >= expires {
            let why = failure.map(|f| format!(" ({f})")).unwrap_or_default();
            return CliError::new(
                EXIT_CONFLICT,
                format!("lease on {r} lost: it expired before the server could be reached to renew it{why}"),
            );
        }
    }
}

/// Gives the lease back. Failing to is reported, not fatal: the lease
/// expires on its own within its TTL.
async fn release(w: &Worker<'_>, g: &Granted) {
    let body =
        ReleaseBody { holder: Some(g.lease.holder.clone()), epoch: Some(g.lease.epoch), ..ReleaseBody::default() };
    match w.client.release(w.ws, &g.item_ref.to_string(), &body).await {
        Ok(answer) if answer.released => {}
        Ok(_) => eprintln!("pad: the lease on {} had already ended", g.item_ref),
        Err(e) => eprintln!(
            "pad: could not release the lease on {} (it expires on its own): {}",
            g.item_ref,
            CliError::for_item(&g.item_ref, e)
        ),
    }
}

/// SIGTERM, then SIGKILL if CMD is still running after [`KILL_GRACE`].
async fn stop(child: &mut Child) -> Result<(), CliError> {
    send_signal(child, libc::SIGTERM);
    if timeout(KILL_GRACE, child.wait()).await.is_err() {
        child.start_kill()?;
        child.wait().await?;
    }
    Ok(())
}

/// Sends `sig` to CMD unless it has been reaped: after that its pid may
/// already belong to another process.
fn send_signal(child: &Child, sig: i32) {
    let Some(pid) = child.id().and_then(|pid| libc::pid_t::try_from(pid).ok()) else { return };
    // SAFETY: kill(2) takes two integers and touches none of our memory; the
    // pid is our own unreaped child's, so it names no other process.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// The shell's convention: the exit code, or 128 + the signal that ended it.
fn exit_code(status: ExitStatus) -> i32 {
    status.code().or(status.signal().map(|sig| 128 + sig)).unwrap_or(1)
}

fn new_session_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// The error with `suffix` appended to its message.
fn with_suffix(e: CliError, suffix: &str) -> CliError {
    match e {
        CliError::Failed { message, code } => CliError::Failed { message: format!("{message}{suffix}"), code },
        other => other,
    }
}

/// SIGINT and SIGTERM, caught so that they reach CMD, and the lease is
/// released after it exits, instead of ending pad with the lease still held.
///
/// CMD runs in pad's process group, so a Ctrl-C typed at a terminal reaches
/// it directly as well; forwarding covers `kill PID` and supervisors that
/// signal pad alone.
struct Signals {
    interrupt: Signal,
    terminate: Signal,
    /// The last one received: the drain stops, and nothing is marked done.
    received: Option<i32>,
}

impl Signals {
    fn catch() -> Result<Self, CliError> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            received: None,
        })
    }

    async fn recv(&mut self) -> i32 {
        let sig = tokio::select! {
            _ = self.interrupt.recv() => libc::SIGINT,
            _ = self.terminate.recv() => libc::SIGTERM,
        };
        self.received = Some(sig);
        sig
    }

    /// The signal received so far, if any, without waiting for one.
    async fn pending(&mut self) -> Option<i32> {
        tokio::select! {
            biased;
            sig = self.recv() => Some(sig),
            () = std::future::ready(()) => self.received,
        }
    }
}

/// The drain's counts: a live line on a terminal, a line per item elsewhere,
/// and the summary at the end.
struct Progress {
    live: bool,
    done: u64,
    failed: u64,
}

impl Progress {
    fn new(live: bool) -> Self {
        Progress { live, done: 0, failed: 0 }
    }

    fn total(&self) -> u64 {
        self.done + self.failed
    }

    fn start(&self, r: &ItemRef) {
        if self.live {
            eprint!("\r\x1b[2Kdrain: {} done, {} failed · running {r}", self.done, self.failed);
        }
    }

    fn finish(&mut self, r: &ItemRef, outcome: &Result<i32, CliError>) {
        if self.live {
            eprint!("\r\x1b[2K");
        }
        match outcome {
            Ok(0) => {
                self.done += 1;
                if !self.live {
                    eprintln!("pad: {r} done");
                }
            }
            Ok(code) => {
                self.failed += 1;
                eprintln!("pad: {r} failed: the command exited {code}; released, not marked done");
            }
            Err(e) => {
                self.failed += 1;
                eprintln!("pad: {r} failed: {e}");
            }
        }
    }

    fn summary(&self) {
        if self.live {
            eprint!("\r\x1b[2K");
        }
        eprintln!("drained {} items: {} done, {} failed", self.total(), self.done, self.failed);
    }
}
