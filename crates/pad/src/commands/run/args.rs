//! The flags of `pad run` and `pad drain`, and what both share (`WorkerArgs`).

use std::ffi::OsString;

use clap::Args;

use crate::commands::item::RefArg;
use crate::commands::lease::{FilterArgs, HolderArg, MaxHoldArg, TtlArgs};
use crate::exit::Exit;
use crate::ttl;

/// `pad run --help`: the exit codes a script can rely on (README, "Exit codes").
const RUN_EXIT_CODES: &str = "\
Exit codes:
  0        CMD exited 0
  N        CMD exited N (128 + S when signal S ended it); see --exit-code-map
  7        the lease could not be taken, or was lost while CMD ran (CMD stopped)
  124      --timeout passed (CMD stopped; the attempt counts as failed)
  126/127  CMD could not be run / was not found (the lease is released)
  128+S    pad got signal S (SIGINT 130, SIGTERM 143); CMD stopped, lease released
  2,3,4,5,8  pad's own: bad input, configuration, auth, not found, server unavailable
When CMD itself exits with one of pad's codes (2 3 4 5 7 8 124), pad says so on
stderr; --exit-code-map 7=107 passes CMD's 7 on as 107, keeping 7 pad's.";

/// `pad drain --help`.
const DRAIN_EXIT_CODES: &str = "\
Exit codes:
  0      nothing (new) is ready, or --max items have run, whatever CMD's codes
  128+S  pad got signal S; the running CMDs were stopped and their leases released
         (how a --follow drain ends: 130 on Ctrl-C)
  other  pad could not go on (server unreachable, CMD cannot be run: 126/127)
With --once: like `pad run` on the one item, or 5 when none was ready.";

/// What `run` and `drain` share: who works, for how long a lease, on what,
/// and within which limits.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub holder: HolderArg,
    /// Lease duration, renewed every third of it while CMD runs
    #[command(flatten)]
    pub ttl: TtlArgs,
    #[command(flatten)]
    pub max_hold: MaxHoldArg,
    /// When CMD exits 0, set the item's status to `done` (fenced by the lease's epoch)
    #[arg(long)]
    pub done_on_success: bool,
    /// Stop CMD (and its process group) after this long, like 25m; the attempt counts as failed
    #[arg(long, value_name = "DURATION", value_parser = positive_seconds)]
    pub timeout: Option<u64>,
    /// How long CMD has to exit after SIGTERM before SIGKILL
    #[arg(long, value_name = "DURATION", value_parser = ttl::parse, default_value = "10s")]
    pub kill_after: u64,
    /// Quarantine an item (needs-human) once it has failed this many times; a drain
    /// then skips quarantined items as with --autonomous [default: the workspace's
    /// quarantine_after_failures]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_attempts: Option<u32>,
    /// Pass CMD's exit code FROM on as TO, e.g. 7=107 (repeatable or comma-separated)
    #[arg(long, value_name = "FROM=TO", value_delimiter = ',', value_parser = exit_code_pair)]
    pub exit_code_map: Vec<(i32, i32)>,
    /// The command and its arguments, after `--`; it gets PAD_REF,
    /// PAD_LEASE_EPOCH, PAD_HOLDER and PAD_SESSION_ID
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// `--timeout`: a duration, and not zero (a limit of nothing is a mistake).
fn positive_seconds(s: &str) -> Result<u64, String> {
    match ttl::parse(s)? {
        0 => Err(format!("`{s}` is no time at all: give a positive duration like 25m")),
        n => Ok(n),
    }
}

/// The codes pad exits with itself: `--exit-code-map` may not map onto them.
const PAD_EXIT_CODES: [i32; Exit::OWN.len()] = {
    let mut codes = [0; Exit::OWN.len()];
    let mut i = 0;
    while i < codes.len() {
        codes[i] = Exit::OWN[i].code();
        i += 1;
    }
    codes
};

/// `--exit-code-map FROM=TO`, both 1..=255, TO not one of pad's own codes.
fn exit_code_pair(s: &str) -> Result<(i32, i32), String> {
    let (from, to) = s.split_once('=').ok_or_else(|| format!("`{s}` is not FROM=TO, like 7=107"))?;
    let code = |c: &str| -> Result<i32, String> {
        c.trim()
            .parse::<i32>()
            .ok()
            .filter(|n| (1..=255).contains(n))
            .ok_or_else(|| format!("`{c}` is not an exit code from 1 to 255"))
    };
    let (from, to) = (code(from)?, code(to)?);
    if PAD_EXIT_CODES.contains(&to) {
        return Err(format!("{to} is one of pad's own exit codes ({PAD_EXIT_CODES:?}); map onto another"));
    }
    Ok((from, to))
}

/// `--exit-code-map`, looked up.
#[derive(Debug, Clone, Default)]
pub struct ExitCodeMap(pub Vec<(i32, i32)>);

impl ExitCodeMap {
    /// CMD's code as pad passes it on.
    pub fn get(&self, code: i32) -> i32 {
        self.0.iter().rev().find(|(from, _)| *from == code).map_or(code, |(_, to)| *to)
    }
}

#[derive(Debug, Args)]
#[command(after_help = RUN_EXIT_CODES)]
pub struct RunArgs {
    #[command(flatten)]
    pub item: RefArg,
    /// Names this run [default: a random id]
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Progress note, shown to the next claimant
    #[arg(long)]
    pub note: Option<String>,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

/// The most jobs one `pad drain` runs at once: as many as one claim-next may
/// grant (`CLAIM_NEXT_COUNT_MAX`), so one request can fill every free slot,
/// and well within what one renewal request carries (`RENEW_LEASES_MAX`).
/// Each job is also a process group with a guard process on this one
/// machine; more work at once is a job for several drains (docs/leases.md,
/// "Draining").
pub const JOBS_MAX: u16 = 32;

#[derive(Debug, Args)]
#[command(after_help = DRAIN_EXIT_CODES)]
pub struct DrainArgs {
    /// Stop after this many items
    #[arg(long, value_name = "N")]
    pub max: Option<u64>,
    /// Run up to N commands at once, each under its own lease (1 to 32)
    // A negative number is a value to refuse with the range, not a flag `-1`.
    #[arg(long, short = 'j', value_name = "N", default_value_t = 1, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u16).range(1..=i64::from(JOBS_MAX)))]
    pub jobs: u16,
    /// Keep going as work arrives: when nothing is ready, wait for it (one
    /// request per 30 s while idle) instead of exiting; Ctrl-C stops
    // `--wait` is a flag here, not claim-next's duration: given one
    // (`--wait 30s`), the refusal says so (`cli::drain_wait_given_a_value`).
    #[arg(long, visible_alias = "wait")]
    pub follow: bool,
    /// Run at most one item and exit with its code, like `pad run`
    #[arg(long, conflicts_with = "max")]
    pub once: bool,
    /// This drain's session id, on every lease it takes; items whose last lease
    /// had it are not claimed again [default: a random one]
    #[arg(long, value_name = "SESSION")]
    pub session: Option<String>,
    #[command(flatten)]
    pub worker: WorkerArgs,
    // Last: its help heading would cover the options after it.
    #[command(flatten)]
    pub filter: FilterArgs,
}
