//! The flags of `pad item`'s content verbs; the lease verbs' are in `lease.rs`.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use pad_core::{ItemRef, Priority, Status};

use crate::commands::lease::{ClaimArgs, ClaimNextArgs, CompleteArgs, FailArgs, FrontierArgs, ReleaseArgs, RenewArgs};

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
    #[command(visible_alias = "edit")]
    Update(UpdateArgs),
    /// Mark an item done, or cancelled with --reason "not planned" (as `gh issue close`)
    Close(CloseArgs),
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

/// A page size: a number of items, at least one.
pub fn parse_limit(s: &str) -> Result<u32, String> {
    crate::numbers::positive(s).map_err(|e| format!("{e} (it is how many items to show, like 50)"))
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
    /// Refuse (exit 7) if the item changed since TIME: the Updated time `pad item show` prints
    #[arg(long, value_name = "TIME")]
    pub expected_updated_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Refuse (exit 7) unless the live lease has this epoch
    #[arg(long, value_name = "N", value_parser = crate::numbers::whole::<i64>)]
    pub lease_epoch: Option<i64>,
    /// Refuse (exit 7) unless the live lease has this lease id
    #[arg(long, value_name = "ID", value_parser = crate::numbers::whole::<i64>)]
    pub lease_id: Option<i64>,
}

/// Why an item is closed, in `gh issue close --reason`'s words; each maps to
/// a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CloseReason {
    /// Status done
    #[value(alias = "done")]
    Completed,
    /// Status cancelled
    #[value(name = "not planned", alias = "not-planned", alias = "cancelled")]
    NotPlanned,
}

impl CloseReason {
    pub fn status(self) -> Status {
        match self {
            CloseReason::Completed => Status::Done,
            CloseReason::NotPlanned => Status::Cancelled,
        }
    }
}

#[derive(Debug, Args)]
pub struct CloseArgs {
    #[command(flatten)]
    pub item: RefArg,
    /// Why it is closed: `completed` (status done) or `not planned` (status cancelled)
    #[arg(long, value_enum, default_value_t = CloseReason::Completed, hide_possible_values = true)]
    pub reason: CloseReason,
    /// Leave a comment on the item once it is closed (none if the close is refused)
    #[arg(short = 'c', long, value_name = "TEXT")]
    pub comment: Option<String>,
    /// Refuse (exit 7) if the item changed since TIME: the Updated time `pad item show` prints
    #[arg(long, value_name = "TIME")]
    pub expected_updated_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Refuse (exit 7) unless the live lease has this epoch
    #[arg(long, value_name = "N", value_parser = crate::numbers::whole::<i64>)]
    pub lease_epoch: Option<i64>,
    /// Refuse (exit 7) unless the live lease has this lease id
    #[arg(long, value_name = "ID", value_parser = crate::numbers::whole::<i64>)]
    pub lease_id: Option<i64>,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub item: RefArg,
    /// Refuse (exit 7) unless the live lease has this epoch
    #[arg(long, value_name = "N", value_parser = crate::numbers::whole::<i64>)]
    pub lease_epoch: Option<i64>,
    /// Refuse (exit 7) unless the live lease has this lease id
    #[arg(long, value_name = "ID", value_parser = crate::numbers::whole::<i64>)]
    pub lease_id: Option<i64>,
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
