//! The tools' arguments. Their doc comments become the JSON schemas'
//! descriptions that agents read, so they say what to pass and why.

use pad_core::api::{ErrorBody, FrontierQuery, TTL_FIELD, TtlSeconds};
use pad_core::{FrontierFilter, Priority, Status, ValidationError};
use rmcp::schemars;
use serde::Deserialize;
use serde_json::Value;

/// The core enums' values as JSON-schema enums, from their one definition.
fn one_of(values: Vec<&'static str>) -> schemars::Schema {
    let mut values: Vec<serde_json::Value> = values.into_iter().map(Into::into).collect();
    values.push(serde_json::Value::Null);
    schemars::json_schema!({ "type": ["string", "null"], "enum": values })
}

fn priority_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    one_of(Priority::ALL.iter().map(|p| p.as_str()).collect())
}

fn status_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    one_of(Status::ALL.iter().map(|s| s.as_str()).collect())
}

/// A whole-number argument (`count`, `wait_seconds`, `ttl_seconds`), read
/// as the API reads it from a body. The arguments keep it as JSON, their
/// schema saying integer, so that anything else (`1.5`, `"2"`, `1e20`) is
/// refused as the API refuses it, with the same code, message and
/// `details.field` (`ErrorBody::unreadable_number`; docs/api.md, "Batches
/// and long polls"), rather than by the MCP library, which names neither.
pub(crate) fn whole(field: &str, given: &Option<Value>) -> Result<Option<i64>, ErrorBody> {
    let Some(given) = given else { return Ok(None) };
    given.as_i64().map(Some).ok_or_else(|| {
        ErrorBody::unreadable_number(field, given).unwrap_or_else(|| {
            ErrorBody::validation(&ValidationError::new(field, format!("must be a whole number (got {given})")))
        })
    })
}

/// A `ttl_seconds` argument: [`whole`], refused as `invalid_ttl` (L8).
pub(crate) fn ttl(given: &Option<Value>) -> Result<Option<TtlSeconds>, ErrorBody> {
    Ok(whole(TTL_FIELD, given)?.map(TtlSeconds))
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Workspace slug; defaults to the configured one.
    pub workspace: Option<String>,
    /// Comma-separated statuses: open, in-progress, done, cancelled.
    pub status: Option<String>,
    /// Comma-separated kinds: task, bug, feature, chore, or a workspace's own.
    pub kind: Option<String>,
    /// Comma-separated labels; items must carry all of them.
    pub label: Option<String>,
    /// true: only items with a live lease; false: only items without.
    pub leased: Option<bool>,
    /// Case-insensitive text to find in titles and bodies.
    pub q: Option<String>,
    /// Page size, 1-500 (default 50).
    pub limit: Option<u32>,
    /// The next_cursor of the previous page.
    pub cursor: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RefArgs {
    pub workspace: Option<String>,
    /// The item's ref, like TASK-5 (case-insensitive).
    #[serde(rename = "ref")]
    pub item_ref: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateArgs {
    pub workspace: Option<String>,
    /// 1-500 characters, one line.
    pub title: String,
    /// Markdown, up to 256 KiB.
    pub body: Option<String>,
    /// task (default), bug, feature, chore, or a workspace's own kind.
    pub kind: Option<String>,
    #[schemars(schema_with = "priority_schema")]
    pub priority: Option<Priority>,
    #[serde(default)]
    pub labels: Vec<String>,
    /// The parent item's ref.
    pub parent: Option<String>,
    /// Refs of items that must be done or cancelled before this one is ready.
    #[serde(default)]
    pub blocked_by: Vec<String>,
    /// A member's email.
    pub assignee: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateArgs {
    pub workspace: Option<String>,
    #[serde(rename = "ref")]
    pub item_ref: String,
    pub title: Option<String>,
    pub body: Option<String>,
    #[schemars(schema_with = "status_schema")]
    pub status: Option<Status>,
    #[schemars(schema_with = "priority_schema")]
    pub priority: Option<Priority>,
    #[serde(default)]
    pub add_labels: Vec<String>,
    #[serde(default)]
    pub remove_labels: Vec<String>,
    /// The item's updated_at as you read it; the write fails with update_conflict if it changed since.
    pub expected_updated_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Your lease's epoch; the write fails with lease_lost unless you still hold that lease.
    pub lease_epoch: Option<i64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommentArgs {
    pub workspace: Option<String>,
    #[serde(rename = "ref")]
    pub item_ref: String,
    /// Markdown.
    pub body: String,
}

/// Which ready items qualify. All given filters must hold.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilterArgs {
    /// Any of these kinds.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// All of these labels.
    #[serde(default)]
    pub labels: Vec<String>,
    /// None of these labels.
    #[serde(default)]
    pub without_labels: Vec<String>,
    #[schemars(schema_with = "priority_schema")]
    pub min_priority: Option<Priority>,
    /// Only children of this item (a ref).
    pub parent: Option<String>,
    /// Skip items labelled needs-human. Autonomous agents should set this.
    #[serde(default)]
    pub autonomous: bool,
}

impl FilterArgs {
    pub fn filter(&self) -> FrontierFilter {
        FrontierFilter {
            kinds: self.kinds.clone(),
            labels: self.labels.clone(),
            without_labels: self.without_labels.clone(),
            min_priority: self.min_priority,
            parent: self.parent.clone(),
            autonomous: self.autonomous,
            exclude: vec![],
            skip_session: None,
        }
    }

    pub fn query(&self, limit: Option<u32>) -> FrontierQuery {
        let join = |v: &[String]| (!v.is_empty()).then(|| v.join(","));
        FrontierQuery {
            kind: join(&self.kinds),
            label: join(&self.labels),
            without_label: join(&self.without_labels),
            min_priority: self.min_priority,
            parent: self.parent.clone(),
            autonomous: Some(self.autonomous),
            exclude: None,
            skip_session: None,
            limit,
        }
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FrontierArgs {
    pub workspace: Option<String>,
    #[serde(flatten)]
    pub filter: FilterArgs,
    /// At most this many items (default 50).
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimArgs {
    pub workspace: Option<String>,
    #[serde(rename = "ref")]
    pub item_ref: String,
    /// Leave out: this session's own holder label is used (see pad_prime). Name one only to act as another worker.
    pub holder: Option<String>,
    /// Leave out: this session's id is used. A claim with another session id counts as another worker.
    pub session_id: Option<String>,
    /// Lease length in whole seconds, 1-86400 (default 900).
    #[schemars(with = "Option<i64>")]
    pub ttl_seconds: Option<Value>,
    /// The longest you may hold it, renewals included (seconds; default: the workspace's cap, if any).
    pub max_hold_seconds: Option<i64>,
    /// A short progress note for whoever holds the item next.
    pub note: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewArgs {
    pub workspace: Option<String>,
    #[serde(rename = "ref")]
    pub item_ref: String,
    /// The epoch of your lease, from the claim's answer. Give it, its lease_id, or both.
    pub epoch: Option<i64>,
    /// The lease_id of your lease, from the claim's answer: names that one grant (L17).
    pub lease_id: Option<i64>,
    /// Defaults to this session's holder (over HTTP: pass the lease.holder your claim returned).
    pub holder: Option<String>,
    /// New lease length from now; defaults to the lease's own.
    #[schemars(with = "Option<i64>")]
    pub ttl_seconds: Option<Value>,
    pub note: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseArgs {
    pub workspace: Option<String>,
    #[serde(rename = "ref")]
    pub item_ref: String,
    /// Defaults to this session's holder (over HTTP: pass the lease.holder your claim returned).
    pub holder: Option<String>,
    /// Your lease's epoch: refuses with lease_lost if the live lease is another grant. Give it, its lease_id, both, or neither (an unfenced release of your own lease).
    pub epoch: Option<i64>,
    /// The lease_id of your lease, from the claim's answer: names that one grant (L17).
    pub lease_id: Option<i64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimNextArgs {
    pub workspace: Option<String>,
    #[serde(flatten)]
    pub filter: FilterArgs,
    /// Leave out: this session's own holder label is used.
    pub holder: Option<String>,
    /// Leave out: this session's id is used.
    pub session_id: Option<String>,
    /// Lease length in whole seconds, 1-86400 (default 900).
    #[schemars(with = "Option<i64>")]
    pub ttl_seconds: Option<Value>,
    /// The longest you may hold it, renewals included (seconds; default: the workspace's cap, if any).
    pub max_hold_seconds: Option<i64>,
    pub note: Option<String>,
    /// Claim up to this many items at once (1-32, default 1), each under its own lease: see grants.
    #[schemars(with = "Option<i64>")]
    pub count: Option<Value>,
    /// When nothing is ready, wait up to this many seconds (0-30, default 0) for an item to become ready.
    #[schemars(with = "Option<i64>")]
    pub wait_seconds: Option<Value>,
    /// wait_seconds by its other name: give one or the other.
    #[schemars(with = "Option<i64>")]
    pub wait: Option<Value>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewLeasesArgs {
    pub workspace: Option<String>,
    /// The leases to renew, at most 100.
    pub leases: Vec<RenewLeaseArg>,
    /// Defaults to this session's holder (over HTTP: pass the lease.holder your claims returned).
    pub holder: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewLeaseArg {
    #[serde(rename = "ref")]
    pub item_ref: String,
    /// The epoch of this lease, from its claim's answer. Give it, its lease_id, or both.
    pub epoch: Option<i64>,
    /// The lease_id of this lease, from its claim's answer: names that one grant (L17).
    pub lease_id: Option<i64>,
    /// New lease length from now; defaults to the lease's own.
    #[schemars(with = "Option<i64>")]
    pub ttl_seconds: Option<Value>,
    pub note: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteArgs {
    pub workspace: Option<String>,
    #[serde(rename = "ref")]
    pub item_ref: String,
    /// The epoch of your lease, from the claim's answer: the status change is refused (lease_lost) unless you still hold it. Give it, its lease_id, or both.
    pub epoch: Option<i64>,
    /// The lease_id of your lease, from the claim's answer: names that one grant (L17).
    pub lease_id: Option<i64>,
    /// Defaults to this session's holder.
    pub holder: Option<String>,
    /// The final status: done (default) or cancelled.
    #[schemars(schema_with = "status_schema")]
    pub status: Option<Status>,
    /// Also claim the next ready item in this same call, once this lease has ended: see NextArgs.
    pub next: Option<NextArgs>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FailArgs {
    pub workspace: Option<String>,
    #[serde(rename = "ref")]
    pub item_ref: String,
    /// The epoch of your lease, from the claim's answer. Give it, its lease_id, or both.
    pub epoch: Option<i64>,
    /// The lease_id of your lease, from the claim's answer: names that one grant (L17).
    pub lease_id: Option<i64>,
    /// Defaults to this session's holder.
    pub holder: Option<String>,
    /// What went wrong and what is left, for the next worker.
    pub note: Option<String>,
    /// Also claim the next ready item in this same call, once this lease has ended: see NextArgs.
    pub next: Option<NextArgs>,
}

/// The next item to claim in the same call as a lease's end, as
/// pad_claim_next picks it (never waiting); the answer's next holds it and
/// its lease, under the same holder. Give {} for any ready item.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NextArgs {
    #[serde(flatten)]
    pub filter: FilterArgs,
    /// Lease length in whole seconds, 1-86400 (default 900).
    #[schemars(with = "Option<i64>")]
    pub ttl_seconds: Option<Value>,
    /// The longest you may hold it, renewals included (seconds; default: the workspace's cap, if any).
    pub max_hold_seconds: Option<i64>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrimeArgs {
    pub workspace: Option<String>,
    /// Whose leases to show; defaults to this session's holder.
    pub holder: Option<String>,
}
