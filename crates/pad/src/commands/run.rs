//! `pad run` and `pad drain` (docs/leases.md, "Working under a lease"): a
//! command run under an item's lease, by a supervisor an operator can leave
//! alone.
//!
//! Both come down to one supervisor, [`supervise`]. Given a fresh lease it
//! starts CMD in its own process group with the lease in its environment
//! (`group.rs` makes sure the group dies with pad, S1), keeps the lease
//! alive (a renewal every third of the TTL, fenced by the epoch), and stops
//! the group — SIGTERM, SIGKILL after `--kill-after` — when the lease is
//! lost, when `--timeout` passes, or when pad is interrupted. Then it ends
//! the lease according to the outcome: released on success (or marked done
//! on `--done-on-success`), released on interruption, nothing to do when it
//! was lost.
//!
//! Exit codes: see [`EXIT_CODES`] (also in `pad run --help` and README).

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use pad_client::Client;
use pad_core::api::{ClaimBody, ClaimNextBody, CompleteBody, FailBody, ReleaseBody};
use pad_core::{FrontierFilter, ItemRef, Lease, Status};
use serde::Serialize;
use tokio::process::Command;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::time::{Instant, sleep_until};

mod report;

use report::Report;

use super::group::Group;
use super::heartbeat::{self, Held};
use super::lease::filter;
use super::{Ctx, about};
use crate::cli::{DrainArgs, ExitCodeMap, RunArgs, WorkerArgs};
use crate::error::{CliError, EXIT_CONFLICT, EXIT_NOT_FOUND};
use crate::output::{self, Format};

/// `pad run` when `--timeout` stopped CMD (as `timeout(1)` does).
pub const EXIT_TIMED_OUT: i32 = 124;

/// The codes pad itself exits with for its own reasons (README, "Exit
/// codes"); CMD exiting with one of them is flagged on stderr.
const RESERVED: [(i32, &str); 7] = [
    (2, "usage or bad input"),
    (3, "configuration"),
    (4, "authentication"),
    (5, "not found / no ready item"),
    (7, "lease taken or lost"),
    (8, "server unavailable"),
    (EXIT_TIMED_OUT, "timed out"),
];

pub async fn run(ctx: &Ctx, a: RunArgs) -> Result<(), CliError> {
    let mut signals = Signals::catch()?;
    let worker = Worker::new(ctx, a.worker)?;
    let r = a.item.item_ref;
    let body = ClaimBody {
        holder: worker.holder.clone(),
        session_id: Some(a.session.unwrap_or_else(new_session_id)),
        ttl_seconds: worker.ttl_seconds,
        note: a.note,
        refresh: None,
        max_hold_seconds: worker.max_hold_seconds,
    };
    let at = Instant::now();
    let claimed = worker.client.claim(worker.ws, &r.to_string(), &body).await.map_err(about(&r))?;
    let mut report = Report::new(ctx.format, false);
    report.handoff(claimed.previous_holder.as_deref(), claimed.previous_note.as_deref());
    let ran = supervise(&worker, Granted { item_ref: r, lease: claimed.lease, at }, &mut signals, &mut report).await?;
    report.finish(&ran);
    report.summary()?;
    worker.exit(&ran)
}

pub async fn drain(ctx: &Ctx, a: DrainArgs) -> Result<(), CliError> {
    let mut signals = Signals::catch()?;
    let worker = Worker::new(ctx, a.worker)?;
    let mut filter = filter(a.filter);
    // An attempt limit means "then leave it to a person": the drain skips
    // quarantined (`needs-human`) items as `--autonomous` does.
    filter.autonomous |= worker.max_attempts.is_some();
    let max = if a.once { Some(1) } else { a.max };
    let mut report = Report::new(ctx.format, true);
    let mut last = None;
    // Every lease of this drain carries its session id, and claim-next
    // skips items whose last lease had it: the drain never runs an item
    // twice (no churn), and what it sends does not grow with what it has
    // done (docs/leases.md, "Draining"). A failed item is the next drain's.
    let session = a.session.unwrap_or_else(new_session_id);
    filter.skip_session = Some(session.clone());
    let stopped = loop {
        if max.is_some_and(|max| report.total() >= max) || signals.pending().await.is_some() {
            break Ok(());
        }
        report.claiming();
        let granted = match next_item(&worker, &filter, &session, &report).await {
            Ok(Some(granted)) => granted,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        };
        let ran = match supervise(&worker, granted, &mut signals, &mut report).await {
            Ok(ran) => ran,
            // CMD could not start, or the server refused something that
            // will not get better with the next item: stop here.
            Err(e) => break Err(e),
        };
        report.finish(&ran);
        last = Some(ran);
    };
    report.summary()?;
    stopped?;
    match (a.once, last, signals.received) {
        (_, _, Some(sig)) => Err(CliError::Exit(128 + sig)),
        (true, None, None) => {
            eprintln!("No ready item");
            Err(CliError::Exit(EXIT_NOT_FOUND))
        }
        (true, Some(ran), None) => worker.exit(&ran),
        _ => Ok(()),
    }
}

/// Claims the best ready item this drain has not run yet: one request, the
/// same size for the first item as for the ten-thousandth.
async fn next_item(
    w: &Worker<'_>,
    filter: &FrontierFilter,
    session: &str,
    report: &Report,
) -> Result<Option<Granted>, CliError> {
    let body = ClaimNextBody {
        filter: filter.clone(),
        holder: w.holder.clone(),
        session_id: Some(session.to_string()),
        ttl_seconds: w.ttl_seconds,
        note: None,
        max_hold_seconds: w.max_hold_seconds,
    };
    let at = Instant::now();
    let next = w.client.claim_next(w.ws, &body).await?;
    let (Some(item), Some(lease)) = (next.item, next.lease) else { return Ok(None) };
    report.handoff(next.previous_holder.as_deref(), next.previous_note.as_deref());
    Ok(Some(Granted { item_ref: item.item_ref, lease, at }))
}

/// What `run` and `drain` share: the server, who works, on what, and within
/// which limits.
struct Worker<'a> {
    client: Client,
    ws: &'a str,
    /// `None` lets the server name the caller (its email).
    holder: Option<String>,
    ttl_seconds: Option<pad_core::api::TtlSeconds>,
    /// L19: `--max-hold`.
    max_hold_seconds: Option<i64>,
    done_on_success: bool,
    timeout: Option<Duration>,
    kill_after: Duration,
    max_attempts: Option<u32>,
    exit_map: ExitCodeMap,
    /// `--format json`: stdout is pad's JSON lines alone.
    json: bool,
    command: Vec<OsString>,
}

impl<'a> Worker<'a> {
    fn new(ctx: &'a Ctx, a: WorkerArgs) -> Result<Self, CliError> {
        if a.command.is_empty() {
            return Err(CliError::usage("no command given after --"));
        }
        let kill_after = Duration::from_secs(a.kill_after);
        if let Some(ttl) = a.ttl.seconds() {
            heartbeat::check_room(Duration::from_secs(ttl.seconds().max(0).unsigned_abs()), kill_after)?;
        }
        Ok(Worker {
            client: ctx.client()?,
            ws: ctx.ws(),
            holder: a.holder.holder,
            ttl_seconds: a.ttl.seconds(),
            max_hold_seconds: a.max_hold.seconds(),
            done_on_success: a.done_on_success,
            timeout: a.timeout.map(Duration::from_secs),
            kill_after,
            max_attempts: a.max_attempts,
            exit_map: ExitCodeMap(a.exit_code_map),
            json: ctx.format == Format::Json,
            command: a.command,
        })
    }

    fn program(&self) -> String {
        self.command[0].to_string_lossy().into_owned()
    }

    /// `pad run`'s exit code for what happened (and `drain --once`'s).
    fn exit(&self, ran: &Ran) -> Result<(), CliError> {
        let code = match ran.outcome {
            Outcome::Succeeded => return Ok(()),
            Outcome::Failed => {
                let code = ran.exit_code.unwrap_or(1);
                let mapped = self.exit_map.get(code);
                if mapped == code
                    && let Some((_, meaning)) = RESERVED.iter().find(|(c, _)| *c == code)
                {
                    eprintln!(
                        "pad: `{}` itself exited {code}, a code pad also uses ({meaning}); \
                         `--exit-code-map {code}=N` tells them apart",
                        self.program()
                    );
                }
                mapped
            }
            Outcome::TimedOut => EXIT_TIMED_OUT,
            Outcome::LeaseLost => EXIT_CONFLICT,
            Outcome::Interrupted => 128 + ran.signal.unwrap_or(libc::SIGINT),
        };
        Err(CliError::Exit(code))
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

/// How one item's run ended (docs/leases.md): the `outcome` of a JSON line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Outcome {
    /// CMD exited 0.
    Succeeded,
    /// CMD exited non-zero (or was killed by a signal pad did not send).
    Failed,
    /// `--timeout` passed; CMD's group was stopped.
    TimedOut,
    /// The lease ended under CMD, whose group was stopped; or the fenced
    /// write at the end was refused because it was no longer ours.
    LeaseLost,
    /// pad got SIGINT/SIGTERM (or CMD, owning the terminal, died of Ctrl-C).
    Interrupted,
}

/// One item's run, as reported: a JSON line per item with `--format json`.
#[derive(Debug, Serialize)]
struct Ran {
    #[serde(rename = "ref")]
    item_ref: ItemRef,
    epoch: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_id: Option<i64>,
    outcome: Outcome,
    /// CMD's exit code (128 + N when signal N ended it).
    exit_code: Option<i32>,
    seconds: f64,
    /// The status set by `--done-on-success`, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status>,
    /// The item's failures so far, after a failure was recorded (L14).
    #[serde(skip_serializing_if = "Option::is_none")]
    failures: Option<i64>,
    /// This failure quarantined the item (`needs-human`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    quarantined: bool,
    /// What pad did or saw, in words (failure note, lease loss).
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip)]
    signal: Option<i32>,
}

/// Runs CMD under the granted lease, from start to the lease's end.
async fn supervise(w: &Worker<'_>, g: Granted, signals: &mut Signals, report: &mut Report) -> Result<Ran, CliError> {
    let started = Instant::now();
    let mut ran = Ran {
        item_ref: g.item_ref.clone(),
        epoch: g.lease.epoch,
        lease_id: Some(g.lease.lease_id),
        outcome: Outcome::Interrupted,
        exit_code: None,
        seconds: 0.0,
        status: None,
        failures: None,
        quarantined: false,
        message: None,
        signal: None,
    };
    // Ctrl-C while the lease was being taken: give it back, run nothing.
    if let Some(sig) = signals.pending().await {
        release(w, &g).await;
        ran.signal = Some(sig);
        return Ok(ran);
    }
    // The workspace's default TTL is known only now (S2: room to renew).
    if let Err(e) = heartbeat::check_room(Duration::from_secs(g.lease.ttl_seconds.into()), w.kill_after) {
        release(w, &g).await;
        return Err(e);
    }
    report.start(&g.item_ref, g.lease.epoch);
    let mut group = match spawn(w, &g) {
        Ok(group) => group,
        Err(e) => {
            release(w, &g).await;
            return Err(e);
        }
    };
    // Polled beside the child rather than spawned, so it ends (and any
    // renewal in flight is dropped) the moment the item is over.
    let mut heartbeat = std::pin::pin!(heartbeat::keep_alive(Held {
        client: &w.client,
        ws: w.ws,
        item_ref: &g.item_ref,
        lease: &g.lease,
        sent: g.at,
        kill_after: w.kill_after,
    }));
    let deadline = w.timeout.map(|t| started + t);
    let mut lost: Option<CliError> = None;
    let mut timed_out = false;
    // Set once pad starts stopping the group: when SIGKILL follows.
    let mut kill_at: Option<Instant> = None;
    let status: ExitStatus = loop {
        tokio::select! {
            status = group.wait() => break status?,
            loss = &mut heartbeat, if lost.is_none() => {
                lost = Some(loss);
                stopping(&group, libc::SIGTERM, &mut kill_at, w.kill_after);
            }
            () = sleep_until(deadline.unwrap_or(started)), if deadline.is_some() && !timed_out => {
                timed_out = true;
                stopping(&group, libc::SIGTERM, &mut kill_at, w.kill_after);
            }
            sig = signals.recv() => stopping(&group, sig, &mut kill_at, w.kill_after),
            () = sleep_until(kill_at.unwrap_or(started)), if kill_at.is_some() => {
                group.signal(libc::SIGKILL);
                kill_at = None;
            }
        }
    };
    let pgid = group.pgid();
    let had_terminal = group.had_terminal();
    // What CMD left behind in its group goes too, before the lease ends;
    // renewals go on meanwhile.
    let left = {
        let mut finish = std::pin::pin!(group.finish(w.kill_after));
        loop {
            tokio::select! {
                left = &mut finish => break left,
                loss = &mut heartbeat, if lost.is_none() => lost = Some(loss),
                _ = signals.recv() => {}
            }
        }
    };
    if left {
        eprintln!("pad: `{}` left processes in its group {pgid}; stopped them", w.program());
    }
    ran.seconds = (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
    let code = exit_code(status);
    ran.exit_code = Some(code);
    // Ctrl-C typed at the terminal CMD owned reached CMD, not pad.
    if had_terminal && status.signal() == Some(libc::SIGINT) && signals.received.is_none() {
        signals.received = Some(libc::SIGINT);
    }
    ran.signal = signals.received;
    ran.outcome = if let Some(e) = lost {
        ran.message = Some(format!("{}; stopped `{}`", e, w.program()));
        Outcome::LeaseLost
    } else if signals.received.is_some() {
        // An interrupted CMD may well exit 0; that does not make its work
        // done, nor is it the item's failure.
        release(w, &g).await;
        Outcome::Interrupted
    } else if timed_out {
        let limit = humantime::format_duration(w.timeout.unwrap_or_default());
        ran.message = Some(format!("timed out after {limit}; stopped `{}`", w.program()));
        end_failed(w, &g, &mut ran, Outcome::TimedOut).await?
    } else if code != 0 {
        ran.message = Some(format!("`{}` exited {code}", w.program()));
        end_failed(w, &g, &mut ran, Outcome::Failed).await?
    } else {
        end_succeeded(w, &g, &mut ran).await?
    };
    Ok(ran)
}

/// Starts stopping CMD's group with `sig`, if not already under way; SIGKILL
/// follows `kill_after` later. A later signal (a second Ctrl-C) is passed on
/// without moving the SIGKILL.
fn stopping(group: &Group, sig: i32, kill_at: &mut Option<Instant>, kill_after: Duration) {
    group.signal(sig);
    if kill_at.is_none() {
        *kill_at = Some(Instant::now() + kill_after);
    }
}

/// CMD exited 0: with `--done-on-success`, set `done` and end the lease in
/// one fenced request (L15); otherwise release it.
async fn end_succeeded(w: &Worker<'_>, g: &Granted, ran: &mut Ran) -> Result<Outcome, CliError> {
    if !w.done_on_success {
        // The release says the work succeeded: the item's news is a success
        // now, not the last failure (docs/leases.md, "News that is true").
        give_back(w, g, true).await;
        return Ok(Outcome::Succeeded);
    }
    let body = CompleteBody {
        epoch: Some(g.lease.epoch),
        lease_id: Some(g.lease.lease_id),
        holder: Some(g.lease.holder.clone()),
        status: None,
    };
    match w.client.complete(w.ws, &g.item_ref.to_string(), &body).await {
        Ok(done) => {
            ran.status = Some(done.item.status);
            Ok(Outcome::Succeeded)
        }
        Err(e) => match CliError::for_item(&g.item_ref, e) {
            e @ CliError::Failed { code: EXIT_CONFLICT, .. } => {
                ran.message = Some(format!("{e}; the item was not marked done"));
                Ok(Outcome::LeaseLost)
            }
            e => {
                release(w, g).await;
                Err(e)
            }
        },
    }
}

/// CMD failed or timed out: the attempt counts as a failure (L14), which
/// ends the lease; `ran.message` is the note left for the next claimant.
/// `--max-attempts` is the quarantine threshold the server applies.
async fn end_failed(w: &Worker<'_>, g: &Granted, ran: &mut Ran, outcome: Outcome) -> Result<Outcome, CliError> {
    let body = FailBody {
        epoch: Some(g.lease.epoch),
        lease_id: Some(g.lease.lease_id),
        holder: Some(g.lease.holder.clone()),
        note: ran.message.clone(),
        max_failures: w.max_attempts,
    };
    match w.client.fail(w.ws, &g.item_ref.to_string(), &body).await {
        Ok(answer) => {
            let item = &answer.item;
            let mut message = ran.message.take().unwrap_or_default();
            message += &format!("; failure {}", item.failures);
            if answer.quarantined {
                message += ", quarantined (needs-human)";
            } else if let Some(at) = item.retry_at {
                message += &format!(", next try after {}", output::at(at, chrono::Utc::now()));
            }
            ran.message = Some(message);
            ran.failures = Some(item.failures);
            ran.quarantined = answer.quarantined;
            Ok(outcome)
        }
        Err(e) => match CliError::for_item(&g.item_ref, e) {
            e @ CliError::Failed { code: EXIT_CONFLICT, .. } => {
                ran.message = Some(format!("{e}; the failure was not recorded"));
                Ok(Outcome::LeaseLost)
            }
            e => {
                release(w, g).await;
                Err(e)
            }
        },
    }
}

/// CMD in its own process group, with the lease in its environment.
fn spawn(w: &Worker<'_>, g: &Granted) -> Result<Group, CliError> {
    let (program, args) = w.command.split_first().ok_or_else(|| CliError::usage("no command given after --"))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("PAD_REF", g.item_ref.to_string())
        .env("PAD_LEASE_EPOCH", g.lease.epoch.to_string())
        .env("PAD_HOLDER", &g.lease.holder)
        .env("PAD_SESSION_ID", g.lease.session_id.as_deref().unwrap_or_default())
        // What `pad guard` needs inside CMD (docs/leases.md, "pad guard").
        .env("PAD_LEASE_ID", g.lease.lease_id.to_string())
        .env("PAD_LEASE_EXPIRES_AT", g.lease.expires_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .env("PAD_WORKSPACE", w.ws)
        .env(super::guard::IN_LEASE_GROUP, "1")
        .env("PAD_KILL_AFTER", format!("{}s", w.kill_after.as_secs()));
    if w.json {
        // pad's JSON lines own stdout; CMD's output goes with the messages.
        let stderr = std::io::stderr().as_fd().try_clone_to_owned()?;
        cmd.stdout(std::process::Stdio::from(stderr));
    }
    Group::spawn(&mut cmd, w.kill_after).map_err(|e| super::group::cannot_run(&program.to_string_lossy(), &e))
}

/// Gives the lease back. Failing to is reported, not fatal: the lease
/// expires on its own within its TTL.
async fn release(w: &Worker<'_>, g: &Granted) {
    give_back(w, g, false).await;
}

/// [`release`], saying whether the holder's work `succeeded`.
async fn give_back(w: &Worker<'_>, g: &Granted, succeeded: bool) {
    let body = ReleaseBody {
        holder: Some(g.lease.holder.clone()),
        epoch: Some(g.lease.epoch),
        lease_id: Some(g.lease.lease_id),
        succeeded,
        ..ReleaseBody::default()
    };
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

/// The shell's convention: the exit code, or 128 + the signal that ended it.
pub(super) fn exit_code(status: ExitStatus) -> i32 {
    status.code().or(status.signal().map(|sig| 128 + sig)).unwrap_or(1)
}

fn new_session_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// SIGINT and SIGTERM, caught so that they reach CMD's group, and the lease
/// is released after it stops, instead of ending pad with the lease held.
pub(super) struct Signals {
    interrupt: Signal,
    terminate: Signal,
    /// The last one received: the drain stops, and nothing is marked done.
    received: Option<i32>,
}

impl Signals {
    pub(super) fn catch() -> Result<Self, CliError> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            received: None,
        })
    }

    pub(super) async fn recv(&mut self) -> i32 {
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
