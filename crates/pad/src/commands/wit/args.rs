//! `pad wit <verb>`: the work-item-tracker contract's verbs and arguments,
//! spelled as that contract spells them (docs/work-item-tracker.md).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use super::id::WitId;

#[derive(Debug, Subcommand)]
pub enum WitCommand {
    /// Create an item; prints the normalized item
    CreateItem(CreateItemArgs),
    /// One item, normalized
    GetItem(IdArg),
    /// Items of the bound workspace (up to limits.list_items_max)
    ListItems(ListItemsArgs),
    /// The direct children of a container
    ListSubItems(ListSubItemsArgs),
    /// Record that ID is blocked by another item
    LinkBlocks(LinkBlocksArgs),
    /// Make ID a child of a container
    AddSubItem(AddSubItemArgs),
    /// Take the lease; never extends a lease already held (exit 7)
    Claim(ClaimArgs),
    /// Extend the live lease named by its handle
    RenewLease(HandleArgs),
    /// End the live lease named by its handle
    Release(HandleArgs),
    /// Report whether an expired lease still holds the item (pad ends expired leases itself)
    Reclaim(IdArg),
    /// Who applied each label, and whether they may admit work
    LabelProvenance(LabelProvenanceArgs),
    /// The provider manifest
    Capabilities,
    /// Write DIR/pad/: capabilities.json and one script per verb, for WIT_ADAPTERS_DIR
    Adapter(AdapterArgs),
}

#[derive(Debug, Args)]
pub struct IdArg {
    /// The item: pad:<workspace>/<PREFIX>#<n>
    #[arg(value_name = "ID")]
    pub id: WitId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum State {
    Open,
    Closed,
    All,
}

#[derive(Debug, Args)]
pub struct CreateItemArgs {
    /// The new item's title
    #[arg(long)]
    pub title: String,
    /// Its description, markdown
    #[arg(long)]
    pub body: Option<String>,
    /// Comma-separated
    #[arg(long, value_name = "A,B")]
    pub labels: Option<String>,
    /// A kind of the workspace (task, bug, …), any case
    #[arg(long = "type", value_name = "NAME")]
    pub kind: Option<String>,
    /// The container to put it under
    #[arg(long, value_name = "ID")]
    pub parent: Option<WitId>,
    /// Comma-separated ids
    #[arg(long, value_name = "ID[,ID]", value_delimiter = ',')]
    pub blocked_by: Vec<WitId>,
    /// <workspace>/<PREFIX>: the workspace must be the bound one; the prefix picks the kind
    #[arg(long, value_name = "WS/PREFIX")]
    pub repo: Option<String>,
}

#[derive(Debug, Args)]
pub struct ListItemsArgs {
    /// Which items: open (open or in progress), closed (done or cancelled), or all
    #[arg(long, value_enum, default_value_t = State::Open)]
    pub state: State,
    /// <workspace>/<PREFIX>: only items of that kind
    #[arg(long, value_name = "WS/PREFIX")]
    pub repo: Option<String>,
}

#[derive(Debug, Args)]
pub struct ListSubItemsArgs {
    /// The container whose children to list
    #[arg(value_name = "PARENT-ID")]
    pub parent: WitId,
    /// Which children: open (open or in progress), closed (done or cancelled), or all
    #[arg(long, value_enum, default_value_t = State::All)]
    pub state: State,
}

#[derive(Debug, Args)]
pub struct LinkBlocksArgs {
    /// The item: pad:<workspace>/<PREFIX>#<n>
    #[arg(value_name = "ID")]
    pub id: WitId,
    /// The item that blocks it
    #[arg(long, value_name = "ID")]
    pub blocked_by: WitId,
}

#[derive(Debug, Args)]
pub struct AddSubItemArgs {
    /// The item: pad:<workspace>/<PREFIX>#<n>
    #[arg(value_name = "ID")]
    pub id: WitId,
    /// The container it goes under
    #[arg(long, value_name = "ID")]
    pub parent: WitId,
}

#[derive(Debug, Args)]
pub struct ClaimArgs {
    /// The item: pad:<workspace>/<PREFIX>#<n>
    #[arg(value_name = "ID")]
    pub id: WitId,
    /// Lease length in whole hours [default: config.lease_ttl_hours]
    #[arg(long, value_name = "N", value_parser = crate::numbers::whole::<u64>)]
    pub ttl_hours: Option<u64>,
    /// Added to the hours, 0 to 59 [default: config.lease_ttl_minutes, else 0]
    #[arg(long, value_name = "N", value_parser = |s: &str| crate::numbers::within::<u64>(s, 0, 59))]
    pub ttl_minutes: Option<u64>,
    /// This session's id, kept with the lease
    #[arg(long, value_name = "S")]
    pub session_id: Option<String>,
}

#[derive(Debug, Args)]
pub struct HandleArgs {
    /// The item: pad:<workspace>/<PREFIX>#<n>
    #[arg(value_name = "ID")]
    pub id: WitId,
    /// The handle claim printed (`lease_comment_id`)
    #[arg(long, value_name = "N", value_parser = crate::numbers::whole::<i64>)]
    pub lease_comment_id: i64,
}

#[derive(Debug, Args)]
pub struct LabelProvenanceArgs {
    /// The item: pad:<workspace>/<PREFIX>#<n>
    #[arg(value_name = "ID")]
    pub id: WitId,
    /// Repeatable
    #[arg(long = "label", value_name = "NAME", required = true)]
    pub labels: Vec<String>,
}

#[derive(Debug, Args)]
pub struct AdapterArgs {
    /// The adapters root; `pad/` is created in it
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The pad binary the scripts run [default: `pad` on PATH, or $PAD_BIN when the script runs]
    #[arg(long, value_name = "PATH")]
    pub pad_bin: Option<PathBuf>,
}
