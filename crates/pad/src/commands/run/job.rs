//! One job: CMD run under one granted lease, from start to the lease's end
//! (docs/leases.md, "Working under a lease"). `pad run` runs one; `pad
//! drain` runs one per slot (`drain.rs`), up to `--jobs` at once. How a
//! job ended is recorded through an outage for as long as its lease can be
//! live (docs/leases.md, "Draining").

use std::cell::Cell;
use std::future::Future;
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use pad_client::ClientError;
use pad_core::api::{
    ClaimNextBody, ClaimNextResponse, CompleteBody, CompleteResponse, FailBody, FailResponse, ReleaseBody,
};
use tokio::process::Command;
use tokio::time::{Instant, sleep_until, timeout_at};

use super::drain::Refill;
use super::report::Report;
use super::signals::Stop;
use super::{Granted, Outcome, Ran, Worker, exit_code};
use crate::commands::group::Group;
use crate::commands::heartbeat::{Heartbeat, Holding, check_room};
use crate::commands::outage::{Backoff, passes};
use crate::error::{CliError, Exit};
use crate::output;

/// Runs CMD under the granted lease, from start to the lease's end.
///
/// `stop` carries the signals pad got; `heartbeat` renews this lease with
/// the supervisor's others (one request for all of them); a drain's
/// `refill` has the lease's end claim the next item too.
pub(super) async fn supervise(
    w: &Worker<'_>, g: Granted, mut stop: Stop, report: &Report, heartbeat: &Heartbeat, refill: Option<&Refill<'_>>,
) -> Result<Ran, CliError> {
    let started = Instant::now();
    let mut ran = ran(&g, Outcome::Interrupted);
    // Ctrl-C while the lease was being taken: give it back, run nothing.
    if let Some(sig) = stop.received() {
        ran.recorded = release(w, &g).await;
        ran.signal = Some(sig);
        return Ok(ran);
    }
    // The workspace's default TTL is known only now (S2: room to renew).
    if let Err(e) = check_room(Duration::from_secs(g.lease.ttl_seconds.into()), w.kill_after) {
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
    // Renewed until `holding` is dropped: the moment the item is over.
    let mut holding = heartbeat.hold(&g.item_ref, &g.lease, g.at);
    let deadline = w.timeout.map(|t| started + t);
    let mut lost: Option<CliError> = None;
    let mut timed_out = false;
    // Set once pad starts stopping the group: when SIGKILL follows. It
    // holds until the group is gone, CMD's exit or not (docs/leases.md, S2).
    let mut kill_at: Option<Instant> = None;
    let mut killed = false;
    let status: ExitStatus = loop {
        tokio::select! {
            status = group.wait() => break status?,
            loss = holding.lost(), if lost.is_none() => {
                lost = Some(loss);
                stopping(&group, libc::SIGTERM, &mut kill_at, &holding);
            }
            () = sleep_until(deadline.unwrap_or(started)), if deadline.is_some() && !timed_out => {
                timed_out = true;
                stopping(&group, libc::SIGTERM, &mut kill_at, &holding);
            }
            sig = stop.recv() => stopping(&group, sig, &mut kill_at, &holding),
            () = sleep_until(kill_at.unwrap_or(started)), if kill_at.is_some() && !killed => {
                group.signal(libc::SIGKILL);
                killed = true;
            }
        }
    };
    let pgid = group.pgid();
    let had_terminal = group.had_terminal();
    // What CMD left behind in its group goes too, before the lease ends;
    // renewals go on meanwhile.
    let left = {
        let mut finish = std::pin::pin!(group.finish(kill_at, holding.kill_by(Instant::now())));
        loop {
            tokio::select! {
                left = &mut finish => break left,
                loss = holding.lost(), if lost.is_none() => lost = Some(loss),
                _ = stop.recv() => {}
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
    if had_terminal && status.signal() == Some(libc::SIGINT) && stop.received().is_none() {
        stop.raise(libc::SIGINT);
    }
    ran.signal = stop.received();
    // How the job ended is recorded while the lease can still be live,
    // through an outage too (docs/leases.md, "Draining").
    let mut end = Ending { w, g: &g, report, holding: &holding, stop: &mut stop, refill };
    ran.outcome = if let Some(e) = lost {
        ran.message = Some(format!("{}; stopped `{}`", e, w.program()));
        Outcome::LeaseLost
    } else if ran.signal.is_some() {
        // An interrupted CMD may well exit 0; that does not make its work
        // done, nor is it the item's failure.
        ran.recorded = release(w, &g).await;
        Outcome::Interrupted
    } else if timed_out {
        let limit = humantime::format_duration(w.timeout.unwrap_or_default());
        ran.message = Some(format!("timed out after {limit}; stopped `{}`", w.program()));
        end.failed(&mut ran, Outcome::TimedOut).await?
    } else if code != 0 {
        ran.message = Some(format!("`{}` exited {code}", w.program()));
        end.failed(&mut ran, Outcome::Failed).await?
    } else {
        end.succeeded(&mut ran).await?
    };
    Ok(ran)
}

/// A grant that must not be run, because its lease was lost before CMD
/// could start (`lost`): reported as a lease lost under CMD is, and, not
/// being ours, not ended.
pub(super) fn not_run(w: &Worker<'_>, g: &Granted, lost: &CliError) -> Ran {
    Ran { message: Some(format!("{lost}; `{}` was not run", w.program())), ..ran(g, Outcome::LeaseLost) }
}

/// The report of `g`'s run, as far as it is known before CMD starts.
fn ran(g: &Granted, outcome: Outcome) -> Ran {
    Ran {
        item_ref: g.item_ref.clone(),
        epoch: g.lease.epoch,
        lease_id: Some(g.lease.lease_id),
        outcome,
        exit_code: None,
        seconds: 0.0,
        status: None,
        failures: None,
        quarantined: false,
        recorded: false,
        message: None,
        signal: None,
    }
}

/// Starts stopping CMD's group with `sig`, if not already under way; SIGKILL
/// follows `kill_after` later, no later than S2 allows ([`Holding::kill_by`]).
/// A later signal (a second Ctrl-C) is passed on without moving the SIGKILL.
fn stopping(group: &Group, sig: i32, kill_at: &mut Option<Instant>, holding: &Holding) {
    group.signal(sig);
    kill_at.get_or_insert_with(|| holding.kill_by(Instant::now()));
}

/// What ends a job's lease once its command is over: the job, and what
/// recording its outcome through an outage needs.
struct Ending<'a, 'w> {
    w: &'a Worker<'w>,
    g: &'a Granted,
    report: &'a Report,
    holding: &'a Holding,
    stop: &'a mut Stop,
    refill: Option<&'a Refill<'a>>,
}

/// Why a job's outcome was not recorded, though the server never refused it.
enum Unrecorded {
    /// No answer but failures that pass, until the lease may have expired
    /// (the last one, in words).
    GaveUp(String),
    /// Signal N came while trying again (the last failure, in words).
    Interrupted(i32, String),
}

impl Unrecorded {
    /// Reports in `ran` that `what` happened but was not recorded.
    fn report(self, ran: &mut Ran, what: String) -> Outcome {
        match self {
            Unrecorded::GaveUp(why) => {
                ran.message = Some(format!(
                    "{what}, but the server could not be reached to record it before the lease may have expired \
                     ({why}); the item goes to the next claimant"
                ));
                Outcome::LeaseLost
            }
            Unrecorded::Interrupted(sig, why) => {
                ran.signal = Some(sig);
                ran.message = Some(format!(
                    "{what}, not recorded: interrupted while the server could not be reached ({why}); its lease \
                     expires on its own"
                ));
                Outcome::Interrupted
            }
        }
    }
}

impl Ending<'_, '_> {
    /// An end the server refused: a lost lease is the job's outcome (`not`
    /// says what was not recorded); anything else stops the drain, the
    /// lease given back first (docs/leases.md, "Draining").
    async fn refused(&self, ran: &mut Ran, e: ClientError, not: &str) -> Result<Outcome, CliError> {
        match CliError::for_item(&self.g.item_ref, e) {
            e if e.exits_with(Exit::Conflict) => {
                ran.message = Some(format!("{e}; {not}"));
                Ok(Outcome::LeaseLost)
            }
            e => {
                release(self.w, self.g).await;
                Err(e)
            }
        }
    }

    /// The end's body for its first try, carrying the drain's claim of the
    /// item for this slot when it wants one, and for any later try, without:
    /// a try that got no answer may still have been recorded with its
    /// grant, and a slot takes one item (docs/leases.md, "Draining").
    fn bodies<B: End>(&self, body: B) -> (B, B) {
        (body.clone().with_next(self.refill.and_then(Refill::ask)), body)
    }

    /// [`Ending::record`] of the end `send` makes, `first` on the first try
    /// and `again` on the others; what came back for the next item goes to
    /// the drain, S2 counting from when the try it came with was sent
    /// (docs/api.md, "The next item in the same call").
    async fn end<'b, B: End, T: End, F: Future<Output = Result<T, ClientError>>>(
        &mut self, first: &'b B, again: &'b B, send: impl Fn(&'b B) -> F,
    ) -> Result<Result<T, ClientError>, Unrecorded> {
        let (sent, tries) = (Cell::new(Instant::now()), Cell::new(0u32));
        let try_end = || {
            sent.set(Instant::now());
            tries.set(tries.get() + 1);
            send(if tries.get() == 1 { first } else { again })
        };
        let mut answer = self.record(try_end).await;
        // The server refused the claim alone (a workspace setting changed
        // under the drain, a server without `next`): nothing was written,
        // so the end is made again without it and the drain asks with
        // claim-next (docs/leases.md, "Draining").
        if tries.get() == 1
            && let Ok(Err(e)) = &answer
            && e.refuses_next()
        {
            if let Some(refill) = self.refill {
                refill.refused_next(e);
            }
            answer = self.record(try_end).await;
        }
        if let Some(refill) = self.refill.filter(|_| first.next().is_some()) {
            let got = answer.as_ref().ok().and_then(|a| a.as_ref().ok()).filter(|_| tries.get() == 1);
            refill.answered(got.and_then(|a| a.answer()).cloned(), sent.get()).await;
        }
        answer
    }

    /// Sends the request that records how the job ended (`send` makes it)
    /// until the server answers it, yes or no. A failure that passes by
    /// waiting (no answer, `unavailable`, `rate_limited`) is tried again
    /// after a pause that doubles, or the server's `Retry-After`, for as
    /// long as the lease can still be live by our clock
    /// ([`Holding::live_until`]): after that another worker may hold the
    /// item, and the outcome is given up (docs/leases.md, "Draining"). A
    /// signal stops the trying at once; the lease expires on its own.
    async fn record<T, F: Future<Output = Result<T, ClientError>>>(
        &mut self, mut send: impl FnMut() -> F,
    ) -> Result<Result<T, ClientError>, Unrecorded> {
        let g = self.g;
        let r = &g.item_ref;
        let mut backoff = Backoff::default();
        let mut why = String::new();
        loop {
            let until = self.holding.live_until();
            // The first try is the one request made before outages were
            // waited out: whatever the clock says, and to its answer.
            let answer = if backoff.failing() {
                if Instant::now() >= until {
                    self.report.recording_given_up(r, &why);
                    return Err(Unrecorded::GaveUp(why));
                }
                tokio::select! {
                    answer = timeout_at(until, send()) => answer.ok(),
                    sig = self.stop.recv() => return Err(Unrecorded::Interrupted(sig, why)),
                }
            } else {
                Some(send().await)
            };
            let retry_after = match answer {
                Some(Err(e)) if passes(&e) => {
                    let retry_after = e.retry_after();
                    why = CliError::for_item(r, e).to_string();
                    retry_after
                }
                Some(answer) => {
                    if backoff.recovered() {
                        self.report.recording_recovered(r);
                    }
                    return Ok(answer);
                }
                None => {
                    why = "no answer before the lease may have expired".to_string();
                    continue;
                }
            };
            // One line when recording starts failing, not one per try.
            if !backoff.failing() {
                self.report.recording_failing(r, &why);
            }
            let pause = Instant::now() + backoff.failed(retry_after);
            tokio::select! {
                () = sleep_until(pause.min(until)) => {}
                sig = self.stop.recv() => return Err(Unrecorded::Interrupted(sig, why)),
            }
        }
    }

    /// CMD exited 0: with `--done-on-success`, set `done` and end the lease
    /// in one fenced request (L15); otherwise release it.
    async fn succeeded(&mut self, ran: &mut Ran) -> Result<Outcome, CliError> {
        let (w, g) = (self.w, self.g);
        let (client, ws, r) = (&w.client, w.ws, &g.item_ref.to_string());
        let what = format!("`{}` exited 0", w.program());
        if !w.done_on_success {
            // The release says the work succeeded: the item's news is a
            // success now, not the last failure (docs/leases.md, "News that
            // is true").
            let (first, again) = self.bodies(release_body(g, true));
            let answer = self.end(&first, &again, |b| client.release(ws, r, b)).await;
            return Ok(match answer {
                Ok(answer) => {
                    ran.recorded = released(g, answer);
                    Outcome::Succeeded
                }
                Err(not) => not.report(ran, what),
            });
        }
        let (first, again) = self.bodies(CompleteBody {
            epoch: Some(g.lease.epoch),
            lease_id: Some(g.lease.lease_id),
            holder: Some(g.lease.holder.clone()),
            ..CompleteBody::default()
        });
        match self.end(&first, &again, |b| client.complete(ws, r, b)).await {
            Ok(Ok(done)) => {
                ran.status = Some(done.item.status);
                ran.recorded = true;
                Ok(Outcome::Succeeded)
            }
            Ok(Err(e)) => self.refused(ran, e, "the item was not marked done").await,
            Err(not) => Ok(not.report(ran, what)),
        }
    }

    /// CMD failed or timed out: the attempt counts as a failure (L14), which
    /// ends the lease; `ran.message` is the note left for the next claimant.
    /// `--max-attempts` is the quarantine threshold the server applies.
    async fn failed(&mut self, ran: &mut Ran, outcome: Outcome) -> Result<Outcome, CliError> {
        let (w, g) = (self.w, self.g);
        let (client, ws, r) = (&w.client, w.ws, &g.item_ref.to_string());
        let (first, again) = self.bodies(FailBody {
            epoch: Some(g.lease.epoch),
            lease_id: Some(g.lease.lease_id),
            holder: Some(g.lease.holder.clone()),
            note: ran.message.clone(),
            max_failures: w.max_attempts,
            next: None,
        });
        match self.end(&first, &again, |b| client.fail(ws, r, b)).await {
            Ok(Ok(answer)) => {
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
                ran.recorded = true;
                Ok(outcome)
            }
            Ok(Err(e)) => self.refused(ran, e, "the failure was not recorded").await,
            Err(not) => {
                let what = ran.message.take().unwrap_or_default();
                Ok(not.report(ran, what))
            }
        }
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
        .env(crate::commands::guard::IN_LEASE_GROUP, "1")
        .env("PAD_KILL_AFTER", format!("{}s", w.kill_after.as_secs()))
        // The same server, workspace and caller as the supervisor's, however
        // it was told them (flags, profile): PAD_URL, PAD_PROFILE,
        // PAD_WORKSPACE, and PAD_TOKEN when it came from the environment. In
        // the environment, never on a command line.
        .envs(w.child_env.iter().map(|(k, v)| (k, v)));
    if w.json {
        // pad's JSON lines own stdout; CMD's output goes with the messages.
        let stderr = std::io::stderr().as_fd().try_clone_to_owned()?;
        cmd.stdout(std::process::Stdio::from(stderr));
    }
    // Several jobs cannot share the terminal: none of them gets it, nor
    // reads it (a background group reading it would be stopped).
    let terminal = w.jobs == 1;
    if !terminal {
        cmd.stdin(std::process::Stdio::null());
    }
    Group::spawn(&mut cmd, w.kill_after, terminal)
        .map_err(|e| crate::commands::group::cannot_run(&program.to_string_lossy(), &e))
}

/// Gives the lease back, in one try; says whether it did. Failing to is
/// reported, not fatal: the lease expires on its own within its TTL.
pub(super) async fn release(w: &Worker<'_>, g: &Granted) -> bool {
    released(g, w.client.release(w.ws, &g.item_ref.to_string(), &release_body(g, false)).await)
}

/// The release of `g`'s lease, saying whether the holder's work `succeeded`.
fn release_body(g: &Granted, succeeded: bool) -> ReleaseBody {
    ReleaseBody {
        holder: Some(g.lease.holder.clone()),
        epoch: Some(g.lease.epoch),
        lease_id: Some(g.lease.lease_id),
        succeeded,
        ..ReleaseBody::default()
    }
}

/// What the server answered a release of `g`'s lease, said on stderr when
/// it is not "released"; whether it was.
fn released(g: &Granted, answer: Result<pad_core::api::ReleaseResponse, ClientError>) -> bool {
    match answer {
        Ok(answer) if answer.released => true,
        Ok(_) => {
            eprintln!("pad: the lease on {} had already ended", g.item_ref);
            false
        }
        Err(e) => {
            eprintln!(
                "pad: could not release the lease on {} (it expires on its own): {}",
                g.item_ref,
                CliError::for_item(&g.item_ref, e)
            );
            false
        }
    }
}

/// A lease end's body or answer, as far as the next item is concerned
/// (docs/api.md, "The next item in the same call").
trait End: Clone {
    /// The body with `next` set.
    fn with_next(self, next: Option<ClaimNextBody>) -> Self;
    /// The claim a body carries.
    fn next(&self) -> Option<&ClaimNextBody>;
    /// The claim's answer an answer carries.
    fn answer(&self) -> Option<&ClaimNextResponse>;
}

macro_rules! end {
    ($body:ty, $answer:ty) => {
        impl End for $body {
            fn with_next(self, next: Option<ClaimNextBody>) -> Self {
                Self { next, ..self }
            }
            fn next(&self) -> Option<&ClaimNextBody> {
                self.next.as_ref()
            }
            fn answer(&self) -> Option<&ClaimNextResponse> {
                None
            }
        }
        impl End for $answer {
            fn with_next(self, _: Option<ClaimNextBody>) -> Self {
                self
            }
            fn next(&self) -> Option<&ClaimNextBody> {
                None
            }
            fn answer(&self) -> Option<&ClaimNextResponse> {
                self.next.as_ref()
            }
        }
    };
}
end!(CompleteBody, CompleteResponse);
end!(FailBody, FailResponse);
end!(ReleaseBody, pad_core::api::ReleaseResponse);
