//! `pad run` and `pad drain` (docs/leases.md, "Working under a lease"): a
//! command run under an item's lease, by a supervisor an operator can leave
//! alone.
//!
//! Both come down to one job, `job::supervise`. Given a fresh lease it
//! starts CMD in its own process group with the lease in its environment
//! (`group.rs` makes sure the group dies with pad, S1), has the supervisor's
//! heartbeat keep the lease alive (`heartbeat.rs`: a renewal every third of
//! the TTL, fenced by the epoch, S2), and stops the group — SIGTERM, SIGKILL
//! after `--kill-after` — when the lease is lost, when `--timeout` passes,
//! or when pad is interrupted. Then it ends the lease according to the
//! outcome: released on success (or marked done on `--done-on-success`),
//! released on interruption, nothing to do when it was lost. `pad run` runs
//! one job; `pad drain` (`drain.rs`) up to `--jobs` at once.
//!
//! Exit codes: `crate::exit` (also in `pad run --help` and README).

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use pad_client::Client;
use pad_core::api::ClaimBody;
use pad_core::{ItemRef, Lease, Status};
use serde::Serialize;
use tokio::time::Instant;

mod args;
mod drain;
mod job;
mod report;
mod signals;

pub use args::*;
pub use drain::drain;
use report::Report;
pub(super) use signals::Signals;
use signals::Stop;

use super::heartbeat::{self, Heartbeat};
use super::{Ctx, about};
use crate::error::{CliError, Exit};
use crate::output::Format;

pub async fn run(ctx: &Ctx, a: RunArgs) -> Result<(), CliError> {
    let stop = Stop::catch()?;
    let worker = Worker::new(ctx, a.worker, 1)?;
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
    let report = Report::new(ctx.format, false, 1);
    report.handoff(claimed.previous_holder.as_deref(), claimed.previous_note.as_deref());
    let heartbeat = Heartbeat::start(worker.client.clone(), worker.ws.to_string(), worker.kill_after);
    let granted = Granted { item_ref: r, lease: claimed.lease, at };
    let ran = job::supervise(&worker, granted, stop, &report, &heartbeat, None).await?;
    report.finish(&ran);
    report.summary()?;
    worker.exit(&ran)
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
    /// `pad drain --jobs`: how many CMDs run at once (1 for `pad run`).
    jobs: usize,
    command: Vec<OsString>,
    /// How a `pad` inside CMD reaches this server as this caller
    /// (`Settings::child_env`); holds a secret when the token came from
    /// `PAD_TOKEN`, so `Worker` is not `Debug`.
    child_env: Vec<(&'static str, String)>,
}

impl<'a> Worker<'a> {
    fn new(ctx: &'a Ctx, a: WorkerArgs, jobs: usize) -> Result<Self, CliError> {
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
            jobs,
            command: a.command,
            child_env: ctx.settings.child_env(),
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
                // pad's own codes, bar 1: any command's failure (README, "Exit codes").
                if mapped == code
                    && let Some(own) = Exit::OWN.into_iter().find(|e| *e != Exit::Internal && e.code() == code)
                {
                    eprintln!(
                        "pad: `{}` itself exited {code}, a code pad also uses ({}); \
                         `--exit-code-map {code}=N` tells them apart",
                        self.program(),
                        own.meaning()
                    );
                }
                mapped
            }
            Outcome::TimedOut => Exit::TimedOut.code(),
            Outcome::LeaseLost => Exit::Conflict.code(),
            Outcome::Interrupted => 128 + ran.signal.unwrap_or(libc::SIGINT),
        };
        Err(CliError::Exit(code))
    }
}

/// A lease just granted, and when: the supervisor's starting point.
struct Granted {
    item_ref: ItemRef,
    lease: Lease,
    /// Our clock just before the request that granted the lease (or, for a
    /// grant that arrived late, renewed it before its job started:
    /// `drain.rs`). The server started the TTL later than this, so `at +
    /// ttl` never overestimates how long the lease lives, whatever the two
    /// clocks say.
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
    /// write at the end was refused because it was no longer ours, or could
    /// not reach the server before the lease may have expired.
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
    /// Whether the server recorded how the job ended (the release, the
    /// completion or the failure): false when the lease was lost, or the
    /// server could not be reached before it may have expired.
    recorded: bool,
    /// What pad did or saw, in words (failure note, lease loss).
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip)]
    signal: Option<i32>,
}

/// The shell's convention: the exit code, or 128 + the signal that ended it.
pub(super) fn exit_code(status: ExitStatus) -> i32 {
    status.code().or(status.signal().map(|sig| 128 + sig)).unwrap_or(1)
}

fn new_session_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}
