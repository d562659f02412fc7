//! `pad drain` (docs/leases.md, "Draining"): claims ready items and runs
//! CMD on each, up to `--jobs` at once, each job under its own lease
//! (`job.rs`), all of their leases renewed by one heartbeat.
//!
//! The loop keeps one claim-next in flight at most. It asks for as many
//! items as there are free slots; when the server has fewer, nothing more
//! is asked until a job ends (work may have arrived meanwhile). Without
//! `--follow` the drain ends when nothing is running and the last claim
//! found nothing; with it, it waits for work with claim-next's long poll:
//! one request per wait period while idle, answered as soon as an item is
//! ready, and a claim that fails for a reason that passes (the server down
//! or busy) is tried again after a pause instead of ending the drain. A
//! job's end claims the item that takes its slot in the same request
//! ([`Refill`]), so a busy drain makes one request per item.

use std::cell::{Cell, RefCell};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use pad_client::ClientError;
use pad_core::api::{CLAIM_NEXT_COUNT_MAX, CLAIM_NEXT_WAIT_MAX_SECONDS, ClaimNextBody, ClaimNextResponse};
use tokio::time::{Instant, sleep};

use super::job::{not_run, release, supervise};
use super::report::Report;
use super::signals::Stop;
use super::{DrainArgs, JOBS_MAX};
use super::{Granted, Ran, Worker, new_session_id};
use crate::commands::Ctx;
use crate::commands::heartbeat::{Fresh, Heartbeat};
use crate::commands::lease::filter;
use crate::commands::outage::{Backoff, passes};
use crate::error::{CliError, Exit};

/// How long one idle `--follow` claim waits on the server for work: as
/// long as the server allows, so an idle drain sends one request per period.
const FOLLOW_WAIT_SECONDS: u32 = CLAIM_NEXT_WAIT_MAX_SECONDS;

// One claim can fill every slot, and one renewal carry every lease.
const _: () = assert!(JOBS_MAX as u32 <= CLAIM_NEXT_COUNT_MAX && JOBS_MAX as usize <= pad_core::api::RENEW_LEASES_MAX);

pub async fn drain(ctx: &Ctx, a: DrainArgs) -> Result<(), CliError> {
    let mut stop = Stop::catch()?;
    let jobs = usize::from(a.jobs);
    let worker = Worker::new(ctx, a.worker, jobs)?;
    let mut filter = filter(a.filter);
    // An attempt limit means "then leave it to a person": the drain skips
    // quarantined (`needs-human`) items as `--autonomous` does.
    filter.autonomous |= worker.max_attempts.is_some();
    let max = if a.once { Some(1) } else { a.max };
    let report = Report::new(ctx.format, true, jobs);
    // Every lease of this drain carries its session id, and claim-next
    // skips items whose last lease had it: the drain never runs an item
    // twice (no churn), and what it sends does not grow with what it has
    // done (docs/leases.md, "Draining"). A failed item is the next drain's.
    let session = a.session.unwrap_or_else(new_session_id);
    filter.skip_session = Some(session.clone());
    let heartbeat = Heartbeat::start(worker.client.clone(), worker.ws.to_string(), worker.kill_after);
    // The one claim this drain makes, for one item at once: sent alone, or
    // with a job's end (docs/api.md, "The next item in the same call").
    let body = ClaimNextBody {
        filter,
        holder: worker.holder.clone(),
        session_id: Some(session),
        ttl_seconds: worker.ttl_seconds,
        max_hold_seconds: worker.max_hold_seconds,
        ..ClaimNextBody::default()
    };
    let refill = Refill {
        body,
        heartbeat: &heartbeat,
        report: &report,
        started: Cell::new(0),
        max,
        stopping: Cell::new(false),
        granted: RefCell::new(Vec::new()),
        found_none: Cell::new(false),
        unsupported: Cell::new(false),
    };

    let mut running = FuturesUnordered::new();
    // Leases of grants this drain will not run, being given back.
    let mut giving_back = FuturesUnordered::new();
    // The one claim-next in flight, how many items it asked for, and
    // whether it is a long poll.
    let mut claiming = None;
    let mut asked = 0;
    let mut long_poll = false;
    // Whether the last claim may have left ready items behind.
    let mut ready = true;
    let mut failed: Option<CliError> = None;
    let mut last: Option<Ran> = None;
    // `--follow`: claims failing for a reason that passes, and the pause
    // before the next try (dropped on a signal, like a long poll).
    let mut backoff = Backoff::default();
    let mut pause = None;
    loop {
        // Grants that came with jobs' ends take the slots those jobs left.
        let refilled = refill.granted.take();
        if failed.is_some() {
            // A job failed the drain meanwhile: run nothing new. The leases
            // are given back beside the running jobs, never holding them up.
            for (g, _) in refilled.into_iter().filter(|(_, lost)| lost.is_none()) {
                let worker = &worker;
                giving_back.push(async move { release(worker, &g).await });
            }
        } else {
            for (g, lost) in refilled {
                match lost {
                    None => running.push(supervise(&worker, g, stop.clone(), &report, &heartbeat, Some(&refill))),
                    Some(e) => {
                        let ran = not_run(&worker, &g, &e);
                        report.finish(&ran);
                        last = Some(ran);
                    }
                }
            }
        }
        let stopping = stop.received().is_some() || failed.is_some();
        refill.stopping.set(stopping);
        let started = refill.started.get();
        if stopping && long_poll {
            // Nothing to wait for any more. Should the server grant an item
            // just as this is dropped, its lease expires within its TTL.
            claiming = None;
            long_poll = false;
            refill.unreserve(asked);
        }
        let room = (jobs - running.len())
            .min(max.map_or(usize::MAX, |m| usize::try_from(m.saturating_sub(started)).unwrap_or(usize::MAX)));
        let wants = !stopping && room > 0 && (ready || a.follow);
        if claiming.is_none() && pause.is_none() && wants {
            let wait = if ready { 0 } else { FOLLOW_WAIT_SECONDS };
            if running.is_empty() {
                report.claiming();
            }
            long_poll = wait > 0;
            asked = room;
            // What a claim asks for counts against `--max` until it answers,
            // so a job's end cannot take the same budget meanwhile.
            refill.started.set(started + room as u64);
            claiming = Some(Box::pin(claim(&worker, &refill.body, &report, &heartbeat, room, wait)));
        }
        // A pause before the next claim keeps a drain that still wants work alive.
        if claiming.is_none() && running.is_empty() && giving_back.is_empty() && !wants {
            break;
        }
        tokio::select! {
            Some(done) = running.next(), if !running.is_empty() => {
                match done {
                    Ok(ran) => {
                        report.finish(&ran);
                        last = Some(ran);
                    }
                    // CMD could not start, or the server refused something
                    // that will not get better with the next item: stop
                    // claiming; the other jobs finish (docs/leases.md, "Draining").
                    Err(e) => {
                        failed.get_or_insert(e);
                    }
                }
                // A job's end that found nothing ready says so; otherwise
                // its slot is free and work may be waiting.
                ready = !refill.found_none.take();
            }
            got = async { claiming.as_mut().expect("guarded").await }, if claiming.is_some() => {
                claiming = None;
                long_poll = false;
                if got.is_err() {
                    refill.unreserve(asked);
                }
                if got.is_ok() && backoff.recovered() {
                    report.claims_recovered();
                }
                match got {
                    Ok(grants) => {
                        ready = grants.len() >= asked;
                        refill.unreserve(asked - grants.len());
                        refill.granted.borrow_mut().extend(grants);
                    }
                    // The server is down, restarting or busy: a service waits
                    // it out, its running jobs untouched (docs/leases.md,
                    // "`--follow`: as work arrives").
                    Err(e) if a.follow && passes(&e) => {
                        let retry_after = e.retry_after();
                        // One line when claims start failing, not one per try.
                        if !backoff.failing() {
                            report.claims_failing(&CliError::from(e).to_string());
                        }
                        pause = Some(Box::pin(sleep(backoff.failed(retry_after))));
                    }
                    Err(e) => {
                        failed.get_or_insert(e.into());
                    }
                }
            }
            Some(_) = giving_back.next(), if !giving_back.is_empty() => {}
            () = async { pause.as_mut().expect("guarded").await }, if pause.is_some() => {
                pause = None;
            }
            // Each job sees the signal itself; the loop only stops claiming.
            _ = stop.recv() => {}
        }
    }
    report.summary()?;
    if let Some(e) = failed {
        return Err(e);
    }
    match (a.once, last, stop.received()) {
        (_, _, Some(sig)) => Err(CliError::Exit(128 + sig)),
        (true, None, None) => {
            eprintln!("No ready item");
            Err(CliError::Exit(Exit::NotFound.code()))
        }
        (true, Some(ran), None) => worker.exit(&ran),
        _ => Ok(()),
    }
}

/// What a job's end asks for besides (docs/api.md, "The next item in the
/// same call"): while the drain still wants work, the end of a job claims
/// the item that takes its slot in the same request, so a drain makes one
/// request per item. The drain loop keeps it current; a job's end
/// ([`Refill::ask`]) takes one item of the `--max` budget, and leaves what
/// came back for the loop to start.
pub(super) struct Refill<'a> {
    body: ClaimNextBody,
    heartbeat: &'a Heartbeat,
    report: &'a Report,
    /// Items taken or asked for so far, against `max`.
    started: Cell<u64>,
    max: Option<u64>,
    /// Set by the loop: no new work (a signal, or a job failed the drain).
    stopping: Cell<bool>,
    /// Grants that came back with jobs' ends, for the loop to start.
    granted: RefCell<Vec<(Granted, Option<CliError>)>>,
    /// A job's end found nothing ready.
    found_none: Cell<bool>,
    /// The server refused `next` as a field it does not know (a server
    /// older than it): ends carry no claim for the rest of the drain.
    unsupported: Cell<bool>,
}

impl<'a> Refill<'a> {
    /// The claim a job's end carries, or none when the drain wants no
    /// more work; asking takes one item of the budget.
    pub(super) fn ask(&self) -> Option<ClaimNextBody> {
        if self.stopping.get() || self.unsupported.get() || self.max.is_some_and(|m| self.started.get() >= m) {
            return None;
        }
        self.started.set(self.started.get() + 1);
        Some(self.body.clone())
    }

    /// A job's end was refused for its claim alone and is made again
    /// without it; a server that does not know `next` at all is not asked
    /// again (docs/leases.md, "Draining").
    pub(super) fn refused_next(&self, e: &ClientError) {
        if e.refused_field() == Some("next") {
            self.unsupported.set(true);
        }
    }

    /// Gives back `n` items of the budget asked for and not granted.
    fn unreserve(&self, n: usize) {
        self.started.set(self.started.get().saturating_sub(n as u64));
    }

    /// What a job's end that carried [`Refill::ask`]'s claim got back
    /// (`None` when the end or the claim failed), the end sent at `at`.
    pub(super) async fn answered(&self, next: Option<ClaimNextResponse>, at: Instant) {
        // Only an answer says nothing is ready; a failure says nothing.
        self.found_none.set(next.as_ref().is_some_and(|n| n.grants.is_empty()));
        let grants = match next {
            Some(next) => grants_of(next, at, self.report, self.heartbeat).await,
            None => Vec::new(),
        };
        if grants.is_empty() {
            self.unreserve(1);
        }
        self.granted.borrow_mut().extend(grants);
    }
}

/// A claim-next's answer as grants to run, sent at `at`: the handoffs said,
/// and the grants that came too late to run on renewed first, in one
/// request, S2 counting from that (docs/leases.md, S2: "A grant that
/// arrives late"). Each comes with why it must not be run, when its lease
/// was lost meanwhile.
async fn grants_of(
    next: ClaimNextResponse, at: Instant, report: &Report, heartbeat: &Heartbeat,
) -> Vec<(Granted, Option<CliError>)> {
    let mut grants: Vec<Granted> = next
        .grants
        .into_iter()
        .map(|g| {
            report.handoff(g.previous_holder.as_deref(), g.previous_note.as_deref());
            Granted { item_ref: g.item.item_ref, lease: g.lease, at }
        })
        .collect();
    let lost = {
        let mut fresh: Vec<Fresh<'_>> =
            grants.iter_mut().map(|g| Fresh { item_ref: &g.item_ref, lease: &mut g.lease, sent: &mut g.at }).collect();
        heartbeat.renew_late(&mut fresh).await
    };
    grants.into_iter().zip(lost).collect()
}

/// Claims up to `count` of the best ready items this drain has not run
/// yet, in one request, waiting up to `wait` seconds for the first: the
/// same request for the first item as for the ten-thousandth.
///
/// A long poll may be answered long after it was sent, and S2 counts from
/// the send: the grants that came too late to run on are renewed first, in
/// one request, and S2 counts from that (docs/leases.md, S2: "A grant that
/// arrives late"). Each grant comes with why it must not be run, when its
/// lease was lost meanwhile. This runs while the jobs' futures are polled,
/// so a slow renewal holds none of them up.
async fn claim(
    w: &Worker<'_>, body: &ClaimNextBody, report: &Report, heartbeat: &Heartbeat, count: usize, wait: u32,
) -> Result<Vec<(Granted, Option<CliError>)>, ClientError> {
    let count = u32::try_from(count).unwrap_or(CLAIM_NEXT_COUNT_MAX).min(CLAIM_NEXT_COUNT_MAX);
    let body = ClaimNextBody {
        // Left out at their defaults, so `--jobs 1` sends today's request.
        count: (count > 1).then_some(i64::from(count)),
        wait_seconds: (wait > 0).then_some(i64::from(wait)),
        ..body.clone()
    };
    let at = Instant::now();
    let next = w.client.claim_next(w.ws, &body).await?;
    Ok(grants_of(next, at, report, heartbeat).await)
}
