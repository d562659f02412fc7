//! What `pad run` and `pad drain` say (docs/leases.md, "Ending the lease,
//! per outcome"): a line per item and a summary on stderr for people, with a
//! live line while a drain looks for work on a terminal, or one JSON object
//! per line on stdout with `--format json`. The supervisor (`run.rs`) only
//! tells it what happened.

use std::cell::RefCell;
use std::io::IsTerminal;

use pad_core::{ItemRef, Status};
use serde::Serialize;
use tokio::time::Instant;

use super::super::lease::handoff_line;
use super::{Outcome, Ran};
use crate::error::CliError;
use crate::output::Format;

/// What pad says about each item and at the end: lines on stderr for people
/// (plus a live line while a drain looks for work, on a terminal), or one
/// JSON object per line on stdout with `--format json`.
pub(super) struct Report {
    json: bool,
    /// `pad drain` (a line per item) rather than `pad run` (quiet on success).
    drain: bool,
    live: bool,
    /// Jobs end one at a time, polled on one task: a `RefCell` is enough.
    counts: RefCell<Counts>,
    started: Instant,
}

#[derive(Debug, Default, Serialize)]
struct Counts {
    items: u64,
    succeeded: u64,
    failed: u64,
    timed_out: u64,
    lease_lost: u64,
    interrupted: u64,
    /// Of the succeeded, how many pad marked done.
    marked_done: u64,
}

impl Report {
    /// `jobs`: how many CMDs may run at once. With more than one, CMDs'
    /// output would cross the live line: none is shown.
    pub(super) fn new(format: Format, drain: bool, jobs: usize) -> Self {
        let json = format == Format::Json;
        Report {
            json,
            drain,
            live: drain && jobs == 1 && std::io::stderr().is_terminal(),
            counts: RefCell::default(),
            started: Instant::now(),
        }
    }

    pub(super) fn clear_live(&self) {
        eprint!("{}", self.clear(""));
    }

    /// `text` for stderr, after what erases the live line when one is
    /// shown: every message of a drain starts on a clean line.
    pub(super) fn clear(&self, text: &str) -> String {
        if self.live { format!("\r\x1b[2K{text}") } else { text.to_string() }
    }

    /// The previous holder's note (L12), for the person watching.
    pub(super) fn handoff(&self, holder: Option<&str>, note: Option<&str>) {
        if let Some(line) = handoff_line(holder, note) {
            eprint!("{}", self.clear(&format!("pad: {line}")));
        }
    }

    /// A drain is about to ask for the next item.
    pub(super) fn claiming(&self) {
        if self.live {
            let c = self.counts.borrow();
            eprint!("\r\x1b[2Kdrain: {} succeeded, {} failed · claiming the next item", c.succeeded, c.failed);
        }
    }

    /// CMD is about to start: the live line goes first, so CMD's output
    /// starts on a clean line.
    pub(super) fn start(&self, r: &ItemRef, epoch: i64) {
        self.clear_live();
        if self.drain && !self.json {
            eprintln!("pad: running {r} (epoch {epoch})");
        }
    }

    /// `--follow`: claims stopped getting through and are being tried
    /// again; said once, not at every try.
    pub(super) fn claims_failing(&self, why: &str) {
        eprintln!("{}", self.clear(&format!("pad: could not claim work; trying again until it gets through: {why}")));
    }

    /// `--follow`: a claim got through again after failing.
    pub(super) fn claims_recovered(&self) {
        eprintln!("{}", self.clear("pad: claims get through again"));
    }

    /// A job's outcome could not be recorded and is being tried again while
    /// its lease can still be live; said once, not at every try.
    pub(super) fn recording_failing(&self, r: &ItemRef, why: &str) {
        eprintln!(
            "{}",
            self.clear(&format!(
                "pad: could not record the outcome of {r}; trying again while its lease can still be live: {why}"
            ))
        );
    }

    /// A job's outcome got through after failing.
    pub(super) fn recording_recovered(&self, r: &ItemRef) {
        eprintln!("{}", self.clear(&format!("pad: recorded the outcome of {r} after all")));
    }

    /// A job's outcome was not recorded before its lease may have expired.
    pub(super) fn recording_given_up(&self, r: &ItemRef, why: &str) {
        eprintln!(
            "{}",
            self.clear(&format!(
                "pad: gave up recording the outcome of {r}: its lease may have expired by now, and the item goes \
                 to the next claimant ({why})"
            ))
        );
    }

    pub(super) fn finish(&self, ran: &Ran) {
        self.clear_live();
        let mut c = self.counts.borrow_mut();
        c.items += 1;
        match ran.outcome {
            Outcome::Succeeded => c.succeeded += 1,
            Outcome::Failed => c.failed += 1,
            Outcome::TimedOut => c.timed_out += 1,
            Outcome::LeaseLost => c.lease_lost += 1,
            Outcome::Interrupted => c.interrupted += 1,
        }
        if ran.status == Some(Status::Done) {
            c.marked_done += 1;
        }
        drop(c);
        if self.json {
            print_line(&serde_json::to_value(ran).unwrap_or_default());
            return;
        }
        let r = &ran.item_ref;
        let secs = format!("{:.1}s", ran.seconds);
        let why = ran.message.as_deref().unwrap_or_default();
        match ran.outcome {
            Outcome::Succeeded if self.drain => {
                let done = if ran.status.is_some() { ", marked done" } else { "" };
                eprintln!("pad: {r} succeeded in {secs}{done}");
            }
            Outcome::Succeeded => {}
            Outcome::Failed if self.drain => eprintln!("pad: {r} failed in {secs}: {why}"),
            Outcome::Failed => {}
            Outcome::TimedOut => eprintln!("pad: {r} {why}"),
            Outcome::LeaseLost => eprintln!("pad: {r}: {why}"),
            Outcome::Interrupted => {
                let sig = match ran.signal {
                    Some(libc::SIGTERM) => "SIGTERM",
                    _ => "SIGINT",
                };
                match (&ran.message, ran.recorded) {
                    (Some(why), false) => eprintln!("pad: {r} interrupted by {sig} after {secs}: {why}"),
                    (None, false) => {
                        eprintln!("pad: {r} interrupted by {sig} after {secs}; its lease expires on its own")
                    }
                    (_, true) => eprintln!("pad: {r} interrupted by {sig} after {secs}; its lease was released"),
                }
            }
        }
    }

    pub(super) fn summary(&self) -> Result<(), CliError> {
        self.clear_live();
        let c = &*self.counts.borrow();
        if self.json {
            let mut v = serde_json::to_value(c).unwrap_or_default();
            v["summary"] = true.into();
            v["seconds"] = ((self.started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0).into();
            print_line(&v);
        } else if self.drain {
            eprintln!("{}", summary_line(c));
        }
        Ok(())
    }
}

/// `pad drain`'s last line (docs/leases.md, "Draining"): `drained 1 item`,
/// `drained 3 items`.
fn summary_line(c: &Counts) -> String {
    let items = if c.items == 1 { "item" } else { "items" };
    let mut line = format!("drained {} {items}: {} succeeded, {} failed", c.items, c.succeeded, c.failed);
    for (n, what) in [(c.timed_out, "timed out"), (c.lease_lost, "lease lost"), (c.interrupted, "interrupted")] {
        if n > 0 {
            line += &format!(", {n} {what}");
        }
    }
    if c.marked_done > 0 {
        line += &format!("; {} marked done", c.marked_done);
    }
    line
}

/// One compact JSON line on stdout, flushed so a reader sees it now.
fn print_line(v: &serde_json::Value) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_says_item_for_one() {
        let one = Counts { items: 1, succeeded: 1, ..Counts::default() };
        assert_eq!(summary_line(&one), "drained 1 item: 1 succeeded, 0 failed");
        let three = Counts { items: 3, succeeded: 2, failed: 1, marked_done: 2, ..Counts::default() };
        assert_eq!(summary_line(&three), "drained 3 items: 2 succeeded, 1 failed; 2 marked done");
    }

    #[test]
    fn messages_erase_the_live_line_first() {
        let mut report = Report::new(Format::Table, true, 1);
        report.live = true;
        assert_eq!(report.clear("pad: Handoff: x\n"), "\r\x1b[2Kpad: Handoff: x\n");
        report.live = false;
        assert_eq!(report.clear("pad: Handoff: x\n"), "pad: Handoff: x\n");
    }
}
