//! `pad guard -- CMD`: a side effect fenced by a lease (docs/leases.md,
//! "pad guard"). It renews the lease at its handle — which both proves the
//! lease is live and ours and says, on the store's clock, how long it has
//! left — runs CMD only if the lease has at least `--min-left` left on that
//! clock, and then keeps the lease alive and stops CMD before the lease could
//! expire, as `pad run` does.

use std::ffi::OsString;
use std::time::Duration;

use clap::Args;
use pad_core::ItemRef;
use pad_core::api::RenewBody;
use pad_core::stop;
use tokio::process::Command;
use tokio::time::{Instant, sleep_until};

use super::group::Group;
use super::heartbeat::{Heartbeat, check_room};
use super::lease::HolderArg;
use super::run::{Signals, exit_code};
use super::{Ctx, about};
use crate::error::{CliError, Exit};
use crate::ttl::{self, seconds_or_zero};

/// `pad guard --help`.
const GUARD_HELP: &str = "\
Inside `pad run` or `pad drain` the lease comes from the environment (PAD_REF,
PAD_LEASE_ID, PAD_HOLDER, PAD_WORKSPACE, PAD_KILL_AFTER), and the supervisor's
server and caller too (PAD_URL, PAD_PROFILE): `pad guard -- git push`.
Elsewhere name it: `pad guard --ref TASK-5 --lease-id 42 -- CMD`; without --holder
(or PAD_HOLDER) the holder is the live lease's at that handle, not your email.
Exit codes:
  N  CMD exited N (128 + S when signal S ended it)
  2  the lease's TTL leaves --kill-after no room to renew (docs/leases.md, S2):
     CMD never ran
  7  the lease is not live at that handle, has less than --min-left left, or was lost
     while CMD ran (CMD was stopped before the lease could expire); or CMD never ran
  8  the server could not be reached to check the lease: CMD never ran";

/// `pad guard`: fenced side effects (docs/leases.md, "pad guard").
#[derive(Debug, Args)]
#[command(after_help = GUARD_HELP)]
pub struct GuardArgs {
    /// The leased item
    #[arg(long = "ref", env = "PAD_REF", hide_env_values = true, value_name = "REF")]
    pub item_ref: ItemRef,
    /// The lease's handle
    #[arg(long, env = "PAD_LEASE_ID", hide_env_values = true, value_name = "ID")]
    pub lease_id: i64,
    #[command(flatten)]
    pub holder: HolderArg,
    /// Run CMD only if the lease has at least this long left (on the server's clock, once renewed)
    #[arg(long, value_name = "DURATION", value_parser = seconds_or_zero, default_value = "0s")]
    pub min_left: u64,
    /// How long CMD has to exit after SIGTERM before SIGKILL
    #[arg(long, env = "PAD_KILL_AFTER", value_name = "DURATION", value_parser = ttl::parse, default_value = "10s")]
    pub kill_after: u64,
    /// The command and its arguments, after `--`
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

pub async fn run(ctx: &Ctx, a: GuardArgs) -> Result<(), CliError> {
    let mut signals = Signals::catch()?;
    let client = ctx.client()?;
    let ws = ctx.ws();
    let r = a.item_ref;
    let kill_after = Duration::from_secs(a.kill_after);
    let program = a.command[0].to_string_lossy().into_owned();
    let not_run = |e| match about(&r)(e) {
        e @ CliError::Failed { .. } => e.with_hint(&format!("; `{program}` was not run")),
        other => other,
    };
    // The handle names the lease; the holder label is only needed because
    // renew asks for it. Not given (and no PAD_HOLDER), it is the live
    // lease's at that handle, not the caller's email: a lease claimed as
    // `--holder ci-7` is guarded with `--ref` and `--lease-id` alone
    // (docs/leases.md, "pad guard"). The renewal still fences on the lease
    // id, so a lease that changed hands meanwhile is refused.
    let holder = match a.holder.holder {
        Some(holder) => Some(holder),
        None => {
            let item = client.item(ws, &r.to_string()).await.map_err(not_run)?;
            item.lease.filter(|l| l.lease_id == a.lease_id).map(|l| l.holder)
        }
    };
    let body = RenewBody { epoch: None, lease_id: Some(a.lease_id), holder, ttl_seconds: None, note: None };
    let sent = Instant::now();
    let renewed = client.renew(ws, &r.to_string(), &body).await.map_err(not_run)?;
    let lease = renewed.lease;
    let ttl = Duration::from_secs(lease.ttl_seconds.into());
    // The lease's TTL is known only now, from the renewal: the same room
    // check as `pad run`'s, or S2 would stop CMD before the first renewal
    // and call a healthy lease lost (docs/leases.md, S2).
    check_room(ttl, kill_after).map_err(|e| e.with_hint(&format!("; `{program}` was not run")))?;
    // `--min-left` asks about the lease itself: its time left as the
    // renewal answered it, from the renewal's `now` to `expires_at` on the
    // store's clock (docs/leases.md, "pad guard"). When S2 would stop CMD is
    // a separate matter, below.
    let left = stop::time_left(&lease);
    let min_left = Duration::from_secs(a.min_left);
    if left < min_left {
        return Err(CliError::new(
            Exit::Conflict,
            format!(
                "the lease on {r} (lease id {}) has {}s left, less than --min-left {}s; `{program}` was not run",
                lease.lease_id,
                left.as_secs(),
                min_left.as_secs()
            ),
        ));
    }
    // A lease at its max hold (L19) may have less left than its TTL: so
    // little that S2 would stop CMD at once.
    if stop::stop_after(left, ttl, kill_after).is_zero() {
        return Err(CliError::new(
            Exit::Conflict,
            format!(
                "the lease on {r} (lease id {}) has {}s left, too little to run `{program}` and stop it {}s \
                 before the lease could expire (docs/leases.md, S2); `{program}` was not run",
                lease.lease_id,
                left.as_secs(),
                (kill_after + stop::margin(ttl)).as_secs_f64()
            ),
        ));
    }
    let (cmd, args) = a.command.split_first().ok_or_else(|| CliError::usage("no command given after --"))?;
    let mut command = Command::new(cmd);
    command.args(args);
    let cannot_run = |e: std::io::Error| super::group::cannot_run(&program, &e);
    // Inside `pad run`/`pad drain` CMD stays in the supervisor's process
    // group, so the supervisor's own S2 stop (SIGKILL to its group) reaches
    // it too; a group of its own would outlive that. Alone, it gets one (S1).
    let mut group = if std::env::var_os(IN_LEASE_GROUP).is_some() {
        Running::Plain(command.kill_on_drop(true).spawn().map_err(cannot_run)?)
    } else {
        Running::Group(Group::spawn(&mut command, kill_after, true).map_err(cannot_run)?)
    };
    let heartbeat = Heartbeat::start(client.clone(), ws.to_string(), kill_after);
    let mut holding = heartbeat.hold(&r, &lease, sent);
    let mut lost: Option<CliError> = None;
    // When SIGKILL follows, once stopping began; it holds though CMD exits
    // first (docs/leases.md, S2).
    let mut kill_at: Option<Instant> = None;
    let mut killed = false;
    let never = Instant::now();
    let status = loop {
        tokio::select! {
            status = group.wait() => break status?,
            loss = holding.lost(), if lost.is_none() => {
                lost = Some(loss);
                group.signal(libc::SIGTERM);
                kill_at.get_or_insert_with(|| holding.kill_by(Instant::now()));
            }
            sig = signals.recv() => {
                group.signal(sig);
                kill_at.get_or_insert_with(|| holding.kill_by(Instant::now()));
            }
            () = sleep_until(kill_at.unwrap_or(never)), if kill_at.is_some() && !killed => {
                group.signal(libc::SIGKILL);
                killed = true;
            }
        }
    };
    if let Running::Group(group) = group {
        group.finish(kill_at, holding.kill_by(Instant::now())).await;
    }
    if let Some(e) = lost {
        return Err(CliError::new(Exit::Conflict, format!("{e}; stopped `{program}`")));
    }
    match exit_code(status) {
        0 => Ok(()),
        code => Err(CliError::Exit(code)),
    }
}

/// Set by `pad run` and `pad drain` in CMD's environment: CMD's process
/// group is the supervisor's to stop.
pub(super) const IN_LEASE_GROUP: &str = "PAD_IN_LEASE_GROUP";

/// CMD, in a process group of its own or in the supervisor's.
enum Running {
    Group(Group),
    Plain(tokio::process::Child),
}

impl Running {
    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Running::Group(g) => g.wait().await,
            Running::Plain(c) => c.wait().await,
        }
    }

    fn signal(&self, sig: i32) {
        match self {
            Running::Group(g) => g.signal(sig),
            Running::Plain(c) => {
                if let Some(pid) = c.id().and_then(|p| i32::try_from(p).ok()) {
                    // SAFETY: kill(2) on our own child, which has not been reaped.
                    unsafe { libc::kill(pid, sig) };
                }
            }
        }
    }
}
