//! The command line's shape (README.md), as clap types. No behaviour here:
//! `commands/` does the work.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use pad_core::api::TtlSeconds;
use pad_core::{ItemRef, Priority, Role, Status};

use crate::output::Format;
use crate::ttl;

#[derive(Debug, Parser)]
#[command(name = "pad", version, about = "A work-item tracker with execution leases", propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Where to connect and how to print. Each flag beats its environment
/// variable, which beats `.pad.toml`, which beats the profile.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Output format; `json` prints only JSON on stdout
    #[arg(long, global = true, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Same as --format json, as gh spells it
    #[arg(long, global = true, conflicts_with = "format")]
    pub json: bool,
    /// Workspace slug [env: PAD_WORKSPACE]
    #[arg(short = 'w', long, global = true, value_name = "SLUG")]
    pub workspace: Option<String>,
    /// Profile in $PAD_HOME/credentials.toml [env: PAD_PROFILE] [default: default]
    #[arg(long, global = true, value_name = "NAME")]
    pub profile: Option<String>,
    /// Server URL [env: PAD_URL] [default: http://127.0.0.1:7777]
    #[arg(long, global = true, value_name = "URL")]
    pub url: Option<String>,
}

// Parsed once per process: boxing the big variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (SQLite in $PAD_HOME by default)
    Serve(ServeArgs),
    /// Benchmark pad on a fresh store behind its own server (docs/benchmarks.md)
    Bench(pad_bench::Options),
    /// Create, list, change and lease work items
    #[command(subcommand)]
    Item(ItemCommand),
    /// List, show and create workspaces
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Workspace membership
    #[command(subcommand)]
    Member(MemberCommand),
    /// API tokens
    #[command(subcommand)]
    Token(TokenCommand),
    /// Send the workspace's events to URLs (owners; docs/webhooks.md)
    #[command(subcommand)]
    Webhook(WebhookCommand),
    /// Sign in to a server and see who you are
    #[command(subcommand)]
    Auth(AuthCommand),
    /// Claim an item, run a command under its lease, release it
    #[command(after_help = RUN_EXIT_CODES)]
    Run(RunArgs),
    /// Claim ready items one after another and run a command on each
    #[command(after_help = DRAIN_EXIT_CODES)]
    Drain(DrainArgs),
    /// Run a side effect (a push, a deploy) only while a lease is live, and stop it
    /// before the lease can expire
    #[command(after_help = GUARD_HELP)]
    Guard(GuardArgs),
    /// Print the workspace's events as they happen (Ctrl-C stops)
    Watch(WatchArgs),
    /// Write a workspace's items, with comments, history and links, as JSON Lines
    Export(ExportArgs),
    /// Create the items of `pad export` (or `gh issue list --json …`) output, all or nothing
    Import(ImportArgs),
    /// Move the store to another database, or back it up (docs/operations.md)
    #[command(subcommand)]
    Db(DbCommand),
    /// Offline administration, run on the server's machine against its store
    #[command(subcommand)]
    Admin(AdminCommand),
    /// The work-item-tracker contract's verbs, served by pad (docs/work-item-tracker.md)
    #[command(subcommand)]
    Wit(crate::commands::wit::WitCommand),
    /// Serve pad's tools to an AI agent over MCP on stdin/stdout
    Mcp(McpArgs),
    /// The brief an AI agent reads at session start: who, leases, ready work
    Prime(PrimeArgs),
    /// Wire pad into an AI coding agent: its MCP config and instructions
    Setup(SetupArgs),
    /// Print a shell completion script
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free one
    #[arg(long, env = "PAD_LISTEN", hide_env_values = true, default_value = "127.0.0.1:7777", value_name = "ADDR")]
    pub listen: String,
    /// `sqlite://PATH`, or `postgres://USER@HOST/DB` for several instances on one database
    /// [default: sqlite://$PAD_HOME/pad.db]
    // Never echo the variable: a Postgres URL carries a password.
    #[arg(long, env = "PAD_DATABASE_URL", hide_env_values = true, value_name = "URL")]
    pub database_url: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ItemCommand {
    /// Create an item and print its ref
    Create(CreateArgs),
    /// List items; leased ones are marked »
    #[command(visible_alias = "ls")]
    List(ListArgs),
    /// Show one item, with its live lease
    #[command(visible_alias = "view")]
    Show(RefArg),
    /// Change an item's fields
    Update(UpdateArgs),
    /// Soft-delete an item
    Delete(DeleteArgs),
    /// Undo a delete
    Restore(RefArg),
    /// An item's versions, newest first
    History(RefArg),
    /// Add a comment, or list them with --list
    Comment(CommentArgs),
    /// Take (or refresh) the execution lease on an item
    Claim(ClaimArgs),
    /// Extend a lease you hold
    #[command(mut_arg("ttl", |a| a.help("Lease duration with a unit: 90s, 30m, 1h30m [default: the lease's own TTL]")))]
    Renew(RenewArgs),
    /// Give a lease back (owners may --force another's)
    Release(ReleaseArgs),
    /// Set the status (default done) and end your lease, in one fenced step
    Complete(CompleteArgs),
    /// Report a failed attempt: ends your lease, counts the failure, defers the item
    Fail(FailArgs),
    /// Claim the best ready item (priority, then age) and print its lease
    ClaimNext(ClaimNextArgs),
    /// Ready items, best first: open, unblocked, unleased
    Frontier(FrontierArgs),
}

#[derive(Debug, Args)]
pub struct RefArg {
    /// Item ref, like TASK-5 (any case)
    #[arg(value_name = "REF")]
    pub item_ref: ItemRef,
}

/// `--body TEXT` or `--body-file FILE` (`-` for stdin), not both.
#[derive(Debug, Default, Args)]
#[group(multiple = false)]
pub struct BodyArgs {
    /// Markdown body
    #[arg(long, value_name = "TEXT")]
    pub body: Option<String>,
    /// Read the body from a file, or `-` for stdin
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The item's title, one line
    pub title: String,
    /// task, bug, feature, chore, or a workspace's own kind [default: task]
    #[arg(long)]
    pub kind: Option<String>,
    #[command(flatten)]
    pub body: BodyArgs,
    /// low, medium, high, critical [default: medium]
    #[arg(long)]
    pub priority: Option<Priority>,
    /// Repeatable or comma-separated (a label never holds a comma)
    #[arg(long = "label", value_name = "LABEL", value_delimiter = ',')]
    pub labels: Vec<String>,
    /// The parent item (a feature, an epic) this one belongs under
    #[arg(long, value_name = "REF")]
    pub parent: Option<ItemRef>,
    /// Repeatable or comma-separated
    #[arg(long, value_name = "REF", value_delimiter = ',')]
    pub blocked_by: Vec<ItemRef>,
    /// A member's email
    #[arg(long, value_name = "EMAIL")]
    pub assignee: Option<String>,
    /// Defer: claim-next and the frontier skip the item until TIME: a duration from
    /// now (2h, 30m), a date (2026-12-03, at 00:00 UTC) or an RFC 3339 time
    #[arg(long, value_name = "TIME", value_parser = crate::when::parse)]
    pub not_before: Option<chrono::DateTime<chrono::Utc>>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// open, in-progress, done, cancelled, or all (repeatable or comma-separated)
    /// [default: open,in-progress]
    #[arg(short = 's', long, value_delimiter = ',', value_parser = parse_status_filter)]
    pub status: Vec<StatusFilter>,
    /// Repeatable or comma-separated
    #[arg(long, value_delimiter = ',')]
    pub kind: Vec<String>,
    /// Items with all of these labels (repeatable or comma-separated)
    #[arg(long = "label", value_name = "LABEL", value_delimiter = ',')]
    pub labels: Vec<String>,
    /// low, medium, high, critical (repeatable or comma-separated)
    #[arg(long, value_delimiter = ',')]
    pub priority: Vec<Priority>,
    /// Only items assigned to this member's email
    #[arg(long, value_name = "EMAIL")]
    pub assignee: Option<String>,
    /// Only items with a live lease
    #[arg(long)]
    pub leased: bool,
    /// Text in the title or body
    #[arg(long, value_name = "TEXT")]
    pub search: Option<String>,
    /// Only children of this item
    #[arg(long, value_name = "REF")]
    pub parent: Option<ItemRef>,
    /// Page size, at least 1 (the server caps it)
    #[arg(long, value_name = "N", value_parser = parse_limit)]
    pub limit: Option<u32>,
    /// Continue after a previous page
    #[arg(long)]
    pub cursor: Option<String>,
}

/// One `--status` of `item list`: a status, or `all` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    All,
    Is(Status),
}

impl std::fmt::Display for StatusFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatusFilter::All => f.write_str("all"),
            StatusFilter::Is(s) => s.fmt(f),
        }
    }
}

fn parse_status_filter(s: &str) -> Result<StatusFilter, String> {
    if s == "all" {
        return Ok(StatusFilter::All);
    }
    s.parse()
        .map(StatusFilter::Is)
        .map_err(|_| format!("{s:?} is no status: open, in-progress, done, cancelled or all"))
}

/// `pad token revoke ID`: a sentence, not the parser's words.
fn token_id(s: &str) -> Result<i64, String> {
    s.parse().map_err(|_| format!("token id must be a number, like 12 (`pad token list` shows them), not {s:?}"))
}

/// `pad webhook remove|test|deliveries ID`.
fn webhook_id(s: &str) -> Result<i64, String> {
    s.parse().map_err(|_| format!("webhook id must be a number, like 3 (`pad webhook list` shows them), not {s:?}"))
}

/// A page size: a number of items, at least one.
fn parse_limit(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(0) => Err("must be at least 1 (it is how many items to show)".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a number of items, like 50")),
    }
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    #[command(flatten)]
    pub item: RefArg,
    /// A new title
    #[arg(long)]
    pub title: Option<String>,
    #[command(flatten)]
    pub body: BodyArgs,
    /// open, in-progress, done, cancelled
    #[arg(long)]
    pub status: Option<Status>,
    /// low, medium, high, critical
    #[arg(long)]
    pub priority: Option<Priority>,
    /// A new kind: task, bug, feature, chore, or a workspace's own
    #[arg(long)]
    pub kind: Option<String>,
    /// Add labels (repeatable or comma-separated)
    #[arg(long = "label", value_name = "LABEL", value_delimiter = ',')]
    pub add_labels: Vec<String>,
    /// Remove labels (repeatable or comma-separated)
    #[arg(long = "remove-label", value_name = "LABEL", value_delimiter = ',')]
    pub remove_labels: Vec<String>,
    /// Move the item under this parent
    #[arg(long, value_name = "REF", conflicts_with = "clear_parent")]
    pub parent: Option<ItemRef>,
    /// Remove the parent link
    #[arg(long)]
    pub clear_parent: bool,
    /// Replace the blockers with these (repeatable or comma-separated)
    #[arg(long, value_name = "REF", value_delimiter = ',')]
    pub blocked_by: Vec<ItemRef>,
    /// Add a blocker (repeatable)
    #[arg(long, value_name = "REF")]
    pub add_blocked_by: Vec<ItemRef>,
    /// Remove a blocker (repeatable)
    #[arg(long, value_name = "REF")]
    pub remove_blocked_by: Vec<ItemRef>,
    /// Defer: claim-next and the frontier skip the item until TIME: a duration from
    /// now (2h, 30m), a date (2026-12-03, at 00:00 UTC) or an RFC 3339 time
    #[arg(long, value_name = "TIME", value_parser = crate::when::parse, conflicts_with = "clear_not_before")]
    pub not_before: Option<chrono::DateTime<chrono::Utc>>,
    /// Remove the deferral
    #[arg(long)]
    pub clear_not_before: bool,
    /// Assign the item to this member's email
    #[arg(long, value_name = "EMAIL", conflicts_with = "unassign")]
    pub assignee: Option<String>,
    /// Remove the assignee
    #[arg(long)]
    pub unassign: bool,
    /// Refuse (exit 7) if the item changed since this RFC 3339 time
    #[arg(long, value_name = "TIME")]
    pub expected_updated_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Refuse (exit 7) unless the live lease has this epoch
    #[arg(long, value_name = "N")]
    pub lease_epoch: Option<i64>,
    /// Refuse (exit 7) unless the live lease has this lease id
    #[arg(long, value_name = "ID")]
    pub lease_id: Option<i64>,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub item: RefArg,
    /// Refuse (exit 7) unless the live lease has this epoch
    #[arg(long, value_name = "N")]
    pub lease_epoch: Option<i64>,
    /// Refuse (exit 7) unless the live lease has this lease id
    #[arg(long, value_name = "ID")]
    pub lease_id: Option<i64>,
}

/// The lease a fenced lease call names: its epoch, its lease id, or both
/// (then both must match).
#[derive(Debug, Args)]
#[group(required = true, multiple = true)]
pub struct LeaseHandleArgs {
    /// The epoch your claim returned
    #[arg(long, value_name = "N")]
    pub epoch: Option<i64>,
    /// The lease id your claim returned
    #[arg(long, value_name = "ID")]
    pub lease_id: Option<i64>,
}

#[derive(Debug, Args)]
pub struct CompleteArgs {
    #[command(flatten)]
    pub item: RefArg,
    #[command(flatten)]
    pub handle: LeaseHandleArgs,
    #[command(flatten)]
    pub holder: HolderArg,
    /// The status to set: done, cancelled, open, in-progress [default: done]
    #[arg(long)]
    pub status: Option<Status>,
}

#[derive(Debug, Args)]
pub struct FailArgs {
    #[command(flatten)]
    pub item: RefArg,
    #[command(flatten)]
    pub handle: LeaseHandleArgs,
    #[command(flatten)]
    pub holder: HolderArg,
    /// What went wrong, shown to the next claimant
    #[arg(long)]
    pub note: Option<String>,
    /// Quarantine at this many failures instead of the workspace's setting
    #[arg(long, value_name = "N")]
    pub max_failures: Option<u32>,
}

#[derive(Debug, Args)]
pub struct CommentArgs {
    #[command(flatten)]
    pub item: RefArg,
    /// The comment (markdown)
    #[arg(required_unless_present = "list", conflicts_with = "list")]
    pub text: Option<String>,
    /// List the item's comments instead
    #[arg(long)]
    pub list: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Write here instead of stdout
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// `pad export` output, a `gh issue list --json number,title,body,state,labels,comments` array, or `-`
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Check everything and say what would be imported, writing nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Copy every table of a store into a new, empty database, then verify it
    Migrate(MigrateArgs),
    /// Copy a SQLite store to a new file while it may be serving
    Backup(BackupArgs),
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The store to copy [default: the one `pad serve` would open]
    #[arg(long, value_name = "URL")]
    pub from: Option<String>,
    /// `sqlite://PATH` or `postgres://…` holding no pad data
    #[arg(long, value_name = "URL")]
    pub to: String,
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The new file to write
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    /// The SQLite store to copy [default: the one `pad serve` would open]
    #[arg(long, value_name = "URL")]
    pub from: Option<String>,
}

/// The lease duration: one of three spellings (docs/leases.md L8).
#[derive(Debug, Default, Args)]
#[group(multiple = false)]
pub struct TtlArgs {
    /// Lease duration with a unit: 90s, 30m, 1h30m [default: the workspace's default TTL]
    // Hyphen values reach the parser, which says why `-5m` is no TTL
    // (clap would suggest `-- -5m`, which is wrong here).
    #[arg(long, value_name = "DURATION", value_parser = ttl::parse, allow_hyphen_values = true)]
    pub ttl: Option<u64>,
    /// Lease duration in minutes
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub ttl_minutes: Option<u32>,
    /// Lease duration in hours
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub ttl_hours: Option<u32>,
}

impl TtlArgs {
    /// The TTL asked for, as the API takes it; the server checks its bounds.
    pub fn seconds(&self) -> Option<TtlSeconds> {
        let secs =
            self.ttl.or(self.ttl_minutes.map(|m| u64::from(m) * 60)).or(self.ttl_hours.map(|h| u64::from(h) * 3600));
        secs.map(TtlSeconds::from)
    }
}

/// Who holds the lease. The variables let a worker set them once.
#[derive(Debug, Args)]
pub struct HolderArg {
    /// Worker label [default: your email]
    #[arg(long, env = "PAD_HOLDER", hide_env_values = true, value_name = "HOLDER")]
    pub holder: Option<String>,
}

#[derive(Debug, Args)]
pub struct ClaimArgs {
    #[command(flatten)]
    pub item: RefArg,
    #[command(flatten)]
    pub holder: HolderArg,
    /// Names one run of the holder
    #[arg(long, env = "PAD_SESSION_ID", hide_env_values = true, value_name = "ID")]
    pub session: Option<String>,
    #[command(flatten)]
    pub ttl: TtlArgs,
    /// Progress note, shown to the next claimant
    #[arg(long)]
    pub note: Option<String>,
    /// Refuse (exit 7) even if you already hold the lease, instead of refreshing it
    #[arg(long)]
    pub no_refresh: bool,
    #[command(flatten)]
    pub max_hold: MaxHoldArg,
}

/// L19: a cap on how long a lease may be held, renewals included.
#[derive(Debug, Default, Args)]
pub struct MaxHoldArg {
    /// Hold the lease at most this long, renewals included, like 2h (at least the TTL,
    /// at most the workspace's max hold) [default: the workspace's, if any]
    #[arg(long = "max-hold", value_name = "DURATION", value_parser = ttl::parse)]
    pub seconds: Option<u64>,
}

impl MaxHoldArg {
    pub fn seconds(&self) -> Option<i64> {
        self.seconds.map(|s| i64::try_from(s).unwrap_or(i64::MAX))
    }
}

#[derive(Debug, Args)]
pub struct RenewArgs {
    #[command(flatten)]
    pub item: RefArg,
    #[command(flatten)]
    pub handle: LeaseHandleArgs,
    #[command(flatten)]
    pub holder: HolderArg,
    /// `pad item renew` says its default: the lease's own TTL.
    #[command(flatten)]
    pub ttl: TtlArgs,
    /// Progress note, shown to the next claimant
    #[arg(long)]
    pub note: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub item: RefArg,
    #[command(flatten)]
    pub holder: HolderArg,
    /// Refuse (exit 7) unless the live lease has this epoch
    #[arg(long, value_name = "N")]
    pub epoch: Option<i64>,
    /// Refuse (exit 7) unless the live lease has this lease id
    #[arg(long, value_name = "ID")]
    pub lease_id: Option<i64>,
    /// Break another worker's lease (workspace owners); on your own lease, a plain
    /// release whose event keeps the reason
    #[arg(long, requires = "reason")]
    pub force: bool,
    /// Why the lease is broken, recorded in the event
    #[arg(long, requires = "force")]
    pub reason: Option<String>,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Only events of this type, like lease.claimed (repeatable or comma-separated)
    #[arg(long = "type", value_name = "TYPE", value_delimiter = ',')]
    pub types: Vec<String>,
    /// Only events about this item (repeatable or comma-separated)
    #[arg(long = "ref", value_name = "REF", value_delimiter = ',')]
    pub refs: Vec<ItemRef>,
    /// Start after this event id; 0 replays the whole log [default: only new events]
    #[arg(long, value_name = "ID")]
    pub after: Option<i64>,
}

/// Which ready items qualify (docs/leases.md L11); shared by `frontier`, `claim-next`
/// and `drain`.
#[derive(Debug, Default, Args)]
#[command(next_help_heading = "Filters")]
pub struct FilterArgs {
    /// Any of these kinds (repeatable or comma-separated)
    #[arg(long = "kind", value_name = "KIND", value_delimiter = ',')]
    pub kinds: Vec<String>,
    /// Items with all of these labels (repeatable or comma-separated)
    #[arg(long = "label", value_name = "LABEL", value_delimiter = ',')]
    pub labels: Vec<String>,
    /// Items with none of these labels (repeatable or comma-separated)
    #[arg(long = "without-label", value_name = "LABEL", value_delimiter = ',')]
    pub without_labels: Vec<String>,
    /// low, medium, high, critical: this or higher
    #[arg(long, value_name = "PRIORITY")]
    pub min_priority: Option<Priority>,
    /// Only children of this item
    #[arg(long, value_name = "REF")]
    pub parent: Option<ItemRef>,
    /// Skip items labelled `needs-human`, as autonomous workers should
    #[arg(long)]
    pub autonomous: bool,
    /// Skip these items (repeatable or comma-separated)
    #[arg(long = "exclude", value_name = "REF", value_delimiter = ',')]
    pub exclude: Vec<ItemRef>,
}

#[derive(Debug, Args)]
pub struct FrontierArgs {
    /// How many items, at least 1 (the server caps it)
    #[arg(long, value_name = "N", value_parser = parse_limit)]
    pub limit: Option<u32>,
    // Last: its help heading would cover the options after it.
    #[command(flatten)]
    pub filter: FilterArgs,
}

#[derive(Debug, Args)]
pub struct ClaimNextArgs {
    #[command(flatten)]
    pub holder: HolderArg,
    /// Names one run of the holder
    #[arg(long, env = "PAD_SESSION_ID", hide_env_values = true, value_name = "ID")]
    pub session: Option<String>,
    #[command(flatten)]
    pub ttl: TtlArgs,
    /// Progress note, shown to the next claimant
    #[arg(long)]
    pub note: Option<String>,
    #[command(flatten)]
    pub max_hold: MaxHoldArg,
    // Last: its help heading would cover the options after it.
    #[command(flatten)]
    pub filter: FilterArgs,
}

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

/// A duration of whole seconds where nothing (`0s`) is a fair answer.
fn seconds_or_zero(s: &str) -> Result<u64, String> {
    if s.trim().trim_end_matches(|c: char| c.is_ascii_alphabetic()) == "0" {
        return Ok(0);
    }
    ttl::parse(s)
}

/// The codes pad exits with itself: `--exit-code-map` may not map onto them.
pub const PAD_EXIT_CODES: [i32; 8] = [1, 2, 3, 4, 5, 7, 8, 124];

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

/// `pad guard --help`.
const GUARD_HELP: &str = "\
Inside `pad run` or `pad drain` the lease comes from the environment (PAD_REF,
PAD_LEASE_ID, PAD_HOLDER, PAD_WORKSPACE, PAD_KILL_AFTER): `pad guard -- git push`.
Elsewhere name it: `pad guard --ref TASK-5 --lease-id 42 --holder ci-7 -- CMD`.
Exit codes:
  N  CMD exited N (128 + S when signal S ended it)
  7  the lease is not live at that handle, has less than --min-left, or was lost
     while CMD ran (CMD was stopped before the lease could expire); or CMD never ran
  8  the server could not be reached to check the lease: CMD never ran";

/// `pad guard`: fenced side effects (docs/leases.md, "pad guard").
#[derive(Debug, Args)]
pub struct GuardArgs {
    /// The leased item
    #[arg(long = "ref", env = "PAD_REF", hide_env_values = true, value_name = "REF")]
    pub item_ref: ItemRef,
    /// The lease's handle
    #[arg(long, env = "PAD_LEASE_ID", hide_env_values = true, value_name = "ID")]
    pub lease_id: i64,
    #[command(flatten)]
    pub holder: HolderArg,
    /// Run CMD only if at least this long is left before it would have to be stopped
    #[arg(long, value_name = "DURATION", value_parser = seconds_or_zero, default_value = "0s")]
    pub min_left: u64,
    /// How long CMD has to exit after SIGTERM before SIGKILL
    #[arg(long, env = "PAD_KILL_AFTER", value_name = "DURATION", value_parser = ttl::parse, default_value = "10s")]
    pub kill_after: u64,
    /// The command and its arguments, after `--`
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

#[derive(Debug, Args)]
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
pub struct DrainArgs {
    /// Stop after this many items
    #[arg(long, value_name = "N")]
    pub max: Option<u64>,
    /// Run up to N commands at once, each under its own lease (1 to 32)
    #[arg(long, short = 'j', value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=i64::from(JOBS_MAX)))]
    pub jobs: u16,
    /// Keep going as work arrives: when nothing is ready, wait for it (one
    /// request per 30 s while idle) instead of exiting; Ctrl-C stops
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

/// `pad mcp`: one agent session. Its claims default to a holder and session
/// id of its own (docs/agents.md), so two sessions never share a lease.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The agent runtime, for the default holder `<agent>@<host>-<id>` [default: detected]
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// This session's holder label [default: .pad.toml `holder`, else `<agent>@<host>-<id>`]
    #[arg(long, env = "PAD_HOLDER", hide_env_values = true, value_name = "HOLDER")]
    pub holder: Option<String>,
}

#[derive(Debug, Args)]
pub struct PrimeArgs {
    /// Whose leases to list [default: .pad.toml `holder`, else your email]
    #[arg(long, env = "PAD_HOLDER", hide_env_values = true, value_name = "HOLDER")]
    pub holder: Option<String>,
}

#[derive(Debug, Args)]
#[command(after_help = "Agents: claude (Claude Code), codex (Codex CLI), cursor (Cursor), gemini (Gemini CLI).\n\
Exit codes: 0 done, or with --check installed and current; 1 with --check when something is missing or \
differs; 2 unknown agent; 3 a config file that does not parse or cannot be written (nothing is changed).")]
pub struct SetupArgs {
    /// claude, codex, cursor or gemini
    #[arg(required_unless_present = "list", value_name = "AGENT")]
    pub agent: Option<String>,
    /// List the agents and the files setup writes for each
    #[arg(long, conflicts_with_all = ["check", "remove", "global"])]
    pub list: bool,
    /// The user's own configuration (in $HOME) instead of the current directory's
    #[arg(long)]
    pub global: bool,
    /// Say whether pad is installed and current; exit 1 when not
    #[arg(long, conflicts_with = "remove")]
    pub check: bool,
    /// Take out exactly what setup added
    #[arg(long)]
    pub remove: bool,
    /// The command the agent runs to start pad's MCP server [default: `pad` when
    /// it is this binary on PATH, else this binary's absolute path]
    #[arg(long, value_name = "PATH")]
    pub command: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// Workspaces you are a member of
    List,
    /// One workspace: settings, kinds, your role [default: the current one]
    Show {
        /// The workspace's slug
        slug: Option<String>,
    },
    /// Change lease settings (owners): TTL default and maximum, quarantine thresholds
    Set(WorkspaceSetArgs),
    /// Create a workspace you own
    Create {
        /// Short name used in URLs and `-w`: lowercase letters, digits, `-`
        slug: String,
        /// Display name [default: the slug]
        #[arg(long)]
        name: Option<String>,
    },
}

/// `pad workspace set` (docs/api.md, "Workspace settings").
#[derive(Debug, Args)]
pub struct WorkspaceSetArgs {
    /// TTL of a claim that names none: 90s, 30m, 1h30m (at most the maximum)
    #[arg(long, value_name = "DURATION", value_parser = ttl::parse, allow_hyphen_values = true)]
    pub default_ttl: Option<u64>,
    /// Longest TTL a claim may ask for, up to 24h
    #[arg(long, value_name = "DURATION", value_parser = ttl::parse, allow_hyphen_values = true)]
    pub max_ttl: Option<u64>,
    /// Lease expiries that quarantine an item (needs-human); 0 turns it off
    #[arg(long, value_name = "N")]
    pub quarantine_after_expiries: Option<u32>,
    /// Failures that quarantine an item (needs-human); 0 turns it off
    #[arg(long, value_name = "N")]
    pub quarantine_after_failures: Option<u32>,
    /// Longest a lease may be held, renewals included, from the default TTL up to 30 days;
    /// 0 turns the cap off
    #[arg(long, value_name = "DURATION", value_parser = seconds_or_zero)]
    pub max_hold: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub enum MemberCommand {
    /// The workspace's members
    List,
    /// Add a member, or change a member's role
    Add {
        /// The member's email
        email: String,
        /// owner, editor, viewer
        #[arg(long, default_value = "editor")]
        role: Role,
    },
    /// Remove a member (their tokens scoped to the workspace are revoked)
    Remove {
        /// The member's email
        email: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Print a fresh token for an existing user, written straight to the
    /// store (recovery when no working token is left)
    Token {
        /// The user's email
        #[arg(long, value_name = "EMAIL")]
        email: String,
        /// `sqlite://PATH` or `postgres://…` [default: sqlite://$PAD_HOME/pad.db]
        #[arg(long, env = "PAD_DATABASE_URL", hide_env_values = true, value_name = "URL")]
        database_url: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Tokens in the workspace (never their secrets)
    List,
    /// Create a token and print it (shown only once)
    ///
    /// Your own token reaches all of your workspaces unless --scoped or
    /// --role is given; a token for another member (--email, owners only) is
    /// always scoped to the workspace, at no more than their role and yours.
    Create {
        /// A label to tell the token apart (`ci-runner`, `laptop`)
        name: String,
        /// Whose token [default: yours; owners may name a member]
        #[arg(long, value_name = "EMAIL")]
        email: Option<String>,
        /// Scope the token to this workspace only
        #[arg(long)]
        scoped: bool,
        /// Role cap of a scoped token (owner, editor, viewer); implies --scoped
        #[arg(long)]
        role: Option<Role>,
    },
    /// Revoke a token by id
    Revoke {
        /// The token's id (`pad token list`)
        #[arg(value_parser = token_id)]
        id: i64,
    },
}

#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Subscribe a URL and print its signing secret (shown only once)
    Add {
        /// An http:// or https:// URL (not `url`: that id is the global --url)
        #[arg(value_name = "URL")]
        target: String,
        /// Deliver only this event type (repeatable) [default: every type]
        #[arg(long = "event", value_name = "TYPE")]
        events: Vec<pad_core::EventKind>,
    },
    /// The workspace's webhooks (never their secrets)
    List,
    /// Unsubscribe (pending deliveries and the log go too)
    Remove {
        /// The webhook's id (`pad webhook list`)
        #[arg(value_parser = webhook_id)]
        id: i64,
    },
    /// Resume a paused webhook: its queued events are sent again, oldest first
    Resume {
        /// The webhook's id (`pad webhook list`)
        #[arg(value_parser = webhook_id)]
        id: i64,
    },
    /// Send a webhook.test delivery now and show how it went
    Test {
        /// The webhook's id (`pad webhook list`)
        #[arg(value_parser = webhook_id)]
        id: i64,
    },
    /// The delivery log of a webhook, newest first
    Deliveries {
        /// The webhook's id (`pad webhook list`)
        #[arg(value_parser = webhook_id)]
        id: i64,
        /// How many [default: 50, at most 500]
        #[arg(long)]
        limit: Option<u32>,
    },
}

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Check a token against the server and save it as a profile
    Login {
        /// The token [default: read from stdin]
        #[arg(long)]
        token: Option<String>,
    },
    /// Remove a saved profile
    Logout,
    /// Who the token belongs to, and its roles
    Whoami,
    /// Which URL, profile, workspace and token are in effect, and from where
    Status,
}

/// A tip for `pad run TASK-1 make test`: the command must follow `--`, and
/// clap's own message ("unexpected argument 'make'") does not say so.
pub fn missing_separator_tip(e: &clap::Error, args: &[String]) -> Option<String> {
    let runner = args.iter().skip(1).find(|a| matches!(a.as_str(), "run" | "drain"))?;
    let wrong =
        matches!(e.kind(), clap::error::ErrorKind::UnknownArgument | clap::error::ErrorKind::MissingRequiredArgument);
    (wrong && !args.iter().any(|a| a == "--")).then(|| {
        let example = if runner == "run" { "pad run TASK-1 -- make test" } else { "pad drain -- make test" };
        format!("tip: put `--` before the command to run, e.g. `{example}`")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("pad").chain(args.iter().copied()))
    }

    #[test]
    fn json_is_format_json_and_conflicts_with_another_format() {
        assert!(parse(&["item", "list", "--json"]).unwrap().global.json);
        assert!(parse(&["item", "list", "--json", "--format", "table"]).is_err());
    }

    #[test]
    fn a_zero_ttl_in_minutes_or_hours_names_its_own_flag() {
        for flag in ["--ttl-minutes", "--ttl-hours"] {
            let e = parse(&["item", "claim", "TASK-1", flag, "0"]).unwrap_err().to_string();
            assert!(e.contains(flag), "{e}");
        }
    }

    #[test]
    fn a_forgotten_separator_gets_the_tip() {
        for line in [&["pad", "run", "TASK-1", "sh", "-c", "true"][..], &["pad", "drain", "make"]] {
            let args: Vec<String> = line.iter().map(ToString::to_string).collect();
            let e = Cli::try_parse_from(&args).unwrap_err();
            assert!(missing_separator_tip(&e, &args).unwrap().contains("`--`"), "{line:?}");
        }
        let args: Vec<String> = ["pad", "item", "list", "extra"].iter().map(ToString::to_string).collect();
        assert_eq!(missing_separator_tip(&Cli::try_parse_from(&args).unwrap_err(), &args), None);
    }

    #[test]
    fn ttl_spellings_are_exclusive() {
        let e = parse(&["item", "claim", "TASK-1", "--ttl", "5m", "--ttl-minutes", "5"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let Cli { command: Command::Item(ItemCommand::Claim(c)), .. } =
            parse(&["item", "claim", "task-1", "--ttl-hours", "2"]).unwrap()
        else {
            panic!()
        };
        assert_eq!((c.item.item_ref.to_string(), c.ttl.seconds()), ("TASK-1".to_string(), Some(TtlSeconds(7200))));
    }

    #[test]
    fn drain_jobs_is_bounded_and_follow_has_an_alias() {
        let drain = |args: &[&str]| match parse(args) {
            Ok(Cli { command: Command::Drain(d), .. }) => Ok((d.jobs, d.follow)),
            Ok(_) => panic!("not a drain"),
            Err(e) => Err(e.exit_code()),
        };
        assert_eq!(drain(&["drain", "--", "true"]), Ok((1, false)));
        assert_eq!(drain(&["drain", "--jobs", "4", "--follow", "--", "true"]), Ok((4, true)));
        assert_eq!(drain(&["drain", "-j", "32", "--wait", "--", "true"]), Ok((JOBS_MAX, true)));
        assert_eq!(drain(&["drain", "--jobs", "0", "--", "true"]), Err(2));
        assert_eq!(drain(&["drain", "--jobs", "33", "--", "true"]), Err(2));
    }

    #[test]
    fn force_needs_a_reason() {
        assert!(parse(&["item", "release", "TASK-1", "--force"]).is_err());
        assert!(parse(&["item", "release", "TASK-1", "--force", "--reason", "stuck"]).is_ok());
    }

    #[test]
    fn run_and_drain_take_the_command_after_double_dash() {
        let Cli { command: Command::Run(r), .. } =
            parse(&["run", "task-3", "--ttl", "3s", "--done-on-success", "--", "sh", "-c", "echo --ttl"]).unwrap()
        else {
            panic!()
        };
        assert_eq!(r.item.item_ref.to_string(), "TASK-3");
        assert_eq!((r.worker.ttl.seconds(), r.worker.done_on_success), (Some(TtlSeconds(3)), true));
        assert_eq!(r.worker.command, ["sh", "-c", "echo --ttl"]);
        assert!(parse(&["run", "TASK-3"]).is_err(), "CMD is required");
        assert!(parse(&["run", "TASK-3", "sleep", "1"]).is_err(), "CMD only after --");

        let Cli { command: Command::Drain(d), .. } =
            parse(&["drain", "--kind", "bug,task", "--autonomous", "--max", "3", "--", "true"]).unwrap()
        else {
            panic!()
        };
        assert_eq!((d.filter.kinds, d.filter.autonomous, d.max), (vec!["bug".into(), "task".into()], true, Some(3)));
        assert!(parse(&["drain", "--once", "--max", "2", "--", "true"]).is_err());
        assert!(parse(&["drain", "--ttl", "1m", "--ttl-hours", "1", "--", "true"]).is_err());
    }

    #[test]
    fn setup_needs_an_agent_or_list() {
        assert!(parse(&["setup"]).is_err());
        assert!(parse(&["setup", "--list"]).is_ok());
        assert!(parse(&["setup", "claude", "--check", "--remove"]).is_err());
        let Cli { command: Command::Setup(s), .. } = parse(&["setup", "codex", "--global", "--remove"]).unwrap() else {
            panic!()
        };
        assert_eq!((s.agent.as_deref(), s.global, s.remove, s.command.as_deref()), (Some("codex"), true, true, None));
    }

    #[test]
    fn bad_refs_and_enums_are_usage_errors() {
        assert_eq!(parse(&["item", "show", "nope"]).unwrap_err().exit_code(), 2);
        assert_eq!(parse(&["item", "list", "--status", "open,bogus"]).unwrap_err().exit_code(), 2);
        assert!(parse(&["item", "list", "--status", "open,done", "-w", "x", "--format", "json"]).is_ok());
    }

    #[test]
    fn supervisor_limits_and_exit_code_maps() {
        let Cli { command: Command::Drain(d), .. } = parse(&[
            "drain",
            "--ttl",
            "30m",
            "--timeout",
            "25m",
            "--max-attempts",
            "3",
            "--done-on-success",
            "--",
            "./work.sh",
        ])
        .unwrap() else {
            panic!("not drain")
        };
        assert_eq!((d.worker.timeout, d.worker.max_attempts, d.worker.kill_after), (Some(1500), Some(3), 10));
        for bad in
            [&["--timeout", "0s"][..], &["--max-attempts", "0"], &["--exit-code-map", "7=8"], &["--exit-code-map", "x"]]
        {
            let args: Vec<&str> = ["drain"].into_iter().chain(bad.iter().copied()).chain(["--", "true"]).collect();
            assert_eq!(parse(&args).unwrap_err().exit_code(), 2, "{bad:?}");
        }
        let Cli { command: Command::Run(r), .. } =
            parse(&["run", "T-1", "--exit-code-map", "7=107,3=103", "--exit-code-map", "3=113", "--", "true"]).unwrap()
        else {
            panic!("not run")
        };
        let map = ExitCodeMap(r.worker.exit_code_map);
        assert_eq!((map.get(7), map.get(3), map.get(9)), (107, 113, 9), "the last mapping of a code wins");
    }
}
