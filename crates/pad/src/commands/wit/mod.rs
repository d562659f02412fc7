//! `pad wit <verb>`: pad as a provider of the work-item-tracker contract.
//! Each verb prints one JSON object (`schema_version` "1.0") on stdout and
//! exits with the contract's code, which is pad's own table (README.md). The
//! mapping and the decisions are in docs/work-item-tracker.md.

mod adapter;
mod args;
mod binding;
mod id;

use std::time::Duration;

use chrono::{DateTime, Utc};
use pad_client::{Client, ClientError};
use pad_core::api::ErrorCode;
use pad_core::api::{ClaimBody, ListQuery, ReleaseBody, RenewBody};
use pad_core::lease::LeaseEnd;
use pad_core::{Item, ItemPatch, ItemRef, Lease, NewItem, Role, Status};
use serde::Serialize;
use serde_json::json;

pub use args::WitCommand;
use args::{
    AddSubItemArgs, ClaimArgs, CreateItemArgs, HandleArgs, LabelProvenanceArgs, LinkBlocksArgs, ListItemsArgs,
    ListSubItemsArgs, State,
};
use binding::Binding;
use id::WitId;

use super::about;
use crate::cli::GlobalArgs;
use crate::error::{CliError, Exit};

pub const SCHEMA_VERSION: &str = "1.0";

pub async fn run(global: &GlobalArgs, cmd: WitCommand) -> Result<(), CliError> {
    match cmd {
        // The manifest is static: it answers without a binding or a server.
        WitCommand::Capabilities => emit(&adapter::manifest()),
        WitCommand::Adapter(a) => {
            let out = adapter::write(&a.dir, a.pad_bin.as_deref())?;
            eprintln!("Wrote {} (point WIT_ADAPTERS_DIR at {})", out.display(), a.dir.display());
            Ok(())
        }
        cmd => {
            let conn = binding::connect(global)?;
            let wit = Wit {
                base: conn.client.base_url().to_string(),
                client: conn.client,
                ws: conn.workspace,
                binding: conn.binding,
            };
            wit.run(cmd).await
        }
    }
}

/// stdout carries exactly one compact JSON line.
fn emit<T: Serialize>(value: &T) -> Result<(), CliError> {
    let mut text = serde_json::to_string(value).map_err(|e| CliError::internal(e.to_string()))?;
    text.push('\n');
    crate::output::print(&text)
}

/// The contract's normalized item, plus pad's own fields (additive).
#[derive(Debug, Serialize)]
struct WitItem {
    schema_version: &'static str,
    id: String,
    title: String,
    state: &'static str,
    assignees: Vec<String>,
    labels: Vec<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    blocked_by_count: usize,
    parent_id: Option<String>,
    url: String,
    #[serde(rename = "ref")]
    item_ref: String,
    status: Status,
    blocked_by: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Items {
    schema_version: &'static str,
    items: Vec<WitItem>,
}

/// What `claim` and `renew-lease` print.
#[derive(Debug, Serialize)]
struct LeaseOut {
    schema_version: &'static str,
    id: String,
    holder: String,
    acquired_at: DateTime<Utc>,
    renewed_at: DateTime<Utc>,
    ttl_hours: u64,
    ttl_minutes: u64,
    ttl_seconds: u32,
    expires_at: DateTime<Utc>,
    lease_comment_id: i64,
    session_id: Option<String>,
    epoch: i64,
}

#[derive(Debug, Serialize)]
struct ProvenanceRow {
    label: String,
    actor: Option<String>,
    permission: Option<&'static str>,
    role: Option<Role>,
    trusted: bool,
    reason: Option<String>,
}

/// The contract's state: pad's open and in-progress are `open`.
fn state_of(status: Status) -> &'static str {
    if status.is_terminal() { "closed" } else { "open" }
}

fn statuses(state: State) -> Option<String> {
    match state {
        State::Open => Some("open,in-progress".into()),
        State::Closed => Some("done,cancelled".into()),
        State::All => None,
    }
}

/// The lease handle the contract calls `lease_comment_id`: pad's
/// `lease_id`, unique in the workspace (docs/leases.md L17).
fn handle(lease: &Lease) -> i64 {
    lease.lease_id
}

struct Wit {
    client: Client,
    ws: String,
    binding: Binding,
    base: String,
}

impl Wit {
    async fn run(&self, cmd: WitCommand) -> Result<(), CliError> {
        match cmd {
            WitCommand::CreateItem(a) => self.create_item(a).await,
            WitCommand::GetItem(a) => {
                let item = self.get(&a.id).await?;
                emit(&self.normalize(&item))
            }
            WitCommand::ListItems(a) => self.list_items(a).await,
            WitCommand::ListSubItems(a) => self.list_sub_items(a).await,
            WitCommand::LinkBlocks(a) => self.link_blocks(a).await,
            WitCommand::AddSubItem(a) => self.add_sub_item(a).await,
            WitCommand::Claim(a) => self.claim(a).await,
            WitCommand::RenewLease(a) => self.renew(a).await,
            WitCommand::Release(a) => self.release(a).await,
            WitCommand::Reclaim(a) => self.reclaim(&a.id).await,
            WitCommand::LabelProvenance(a) => self.label_provenance(a).await,
            WitCommand::Capabilities | WitCommand::Adapter(_) => unreachable!("answered without a connection"),
        }
    }

    /// Ids name the bound workspace: a binding serves one.
    fn check(&self, id: &WitId) -> Result<ItemRef, CliError> {
        if id.workspace != self.ws {
            return Err(CliError::usage(format!(
                "{id} is in workspace {:?}; this binding serves {:?}",
                id.workspace, self.ws
            )));
        }
        Ok(id.item_ref.clone())
    }

    fn id(&self, r: &ItemRef) -> String {
        WitId::new(&self.ws, r.clone()).to_string()
    }

    async fn get(&self, id: &WitId) -> Result<Item, CliError> {
        let r = self.check(id)?;
        self.client.item(&self.ws, &r.to_string()).await.map_err(about(&r))
    }

    fn normalize(&self, item: &Item) -> WitItem {
        // Who holds the item: its assignee and the live lease's holder. An
        // expired lease is gone from every read, so it holds nothing.
        let mut assignees: Vec<String> = item.assignee.iter().cloned().collect();
        if let Some(l) = &item.lease
            && !assignees.contains(&l.holder)
        {
            assignees.push(l.holder.clone());
        }
        WitItem {
            schema_version: SCHEMA_VERSION,
            id: self.id(&item.item_ref),
            title: item.title.clone(),
            state: state_of(item.status),
            assignees,
            labels: item.labels.clone(),
            kind: Some(item.kind.clone()),
            blocked_by_count: item.blocked_by_open.len(),
            parent_id: item.parent.as_ref().map(|p| self.id(p)),
            url: format!("{}#/ws/{}/items/{}", self.base, self.ws, item.item_ref),
            item_ref: item.item_ref.to_string(),
            status: item.status,
            blocked_by: item.blocked_by.iter().map(|b| self.id(b)).collect(),
        }
    }

    /// Up to `LIST_ITEMS_MAX` items, page by page.
    async fn list(
        &self, status: Option<String>, kind: Option<String>, parent: Option<&ItemRef>,
    ) -> Result<Vec<Item>, CliError> {
        let mut items = Vec::new();
        let mut cursor = None;
        loop {
            let query = ListQuery {
                status: status.clone(),
                kind: kind.clone(),
                parent: parent.map(ToString::to_string),
                cursor,
                ..ListQuery::default()
            };
            let page = self.client.list_items(&self.ws, &query).await?;
            items.extend(page.items);
            cursor = page.next_cursor;
            if cursor.is_none() || items.len() >= adapter::LIST_ITEMS_MAX {
                items.truncate(adapter::LIST_ITEMS_MAX);
                return Ok(items);
            }
        }
    }

    fn items(&self, items: &[Item]) -> Items {
        Items { schema_version: SCHEMA_VERSION, items: items.iter().map(|i| self.normalize(i)).collect() }
    }

    async fn kind_for(&self, a: &CreateItemArgs) -> Result<Option<String>, CliError> {
        let by_prefix = match &a.repo {
            None => None,
            Some(repo) => {
                let (ws, prefix) = id::parse_repo(repo)
                    .ok_or_else(|| CliError::usage(format!("--repo {repo:?} is not <workspace>/<PREFIX>")))?;
                if ws != self.ws {
                    return Err(CliError::usage(format!(
                        "--repo names workspace {ws:?}; this binding serves {:?}",
                        self.ws
                    )));
                }
                let kinds = self.client.kinds(&self.ws).await?.kinds;
                let kind = kinds.into_iter().find(|k| k.prefix.eq_ignore_ascii_case(&prefix)).ok_or_else(|| {
                    CliError::usage(format!("workspace {:?} has no kind with prefix {prefix}", self.ws))
                })?;
                Some(kind.name)
            }
        };
        match (by_prefix, &a.kind) {
            (Some(k), Some(t)) if !k.eq_ignore_ascii_case(t) => Err(CliError::usage(format!(
                "--type {t} and --repo {} (kind {k}) disagree",
                a.repo.as_deref().unwrap_or("")
            ))),
            (Some(k), _) => Ok(Some(k)),
            (None, t) => Ok(t.as_ref().map(|t| t.to_ascii_lowercase())),
        }
    }

    async fn create_item(&self, a: CreateItemArgs) -> Result<(), CliError> {
        let kind = self.kind_for(&a).await?;
        let parent = a.parent.as_ref().map(|p| self.check(p)).transpose()?;
        let blocked_by = a.blocked_by.iter().map(|b| self.check(b)).collect::<Result<Vec<_>, _>>()?;
        // A missing parent or blocker is "not found" (5), as for any id.
        for r in parent.iter().chain(&blocked_by) {
            self.client.item(&self.ws, &r.to_string()).await.map_err(about(r))?;
        }
        let labels = a.labels.as_deref().unwrap_or_default().split(',').map(str::trim).filter(|l| !l.is_empty());
        let new = NewItem {
            title: a.title,
            body: a.body.unwrap_or_default(),
            kind,
            labels: labels.map(str::to_string).collect(),
            parent: parent.map(|p| p.to_string()),
            blocked_by: blocked_by.iter().map(ToString::to_string).collect(),
            ..NewItem::default()
        };
        let item = self.client.create_item(&self.ws, &new).await?;
        emit(&self.normalize(&item))
    }

    async fn list_items(&self, a: ListItemsArgs) -> Result<(), CliError> {
        let kind = match &a.repo {
            None => None,
            Some(repo) => {
                let (ws, prefix) = id::parse_repo(repo)
                    .ok_or_else(|| CliError::usage(format!("--repo {repo:?} is not <workspace>/<PREFIX>")))?;
                if ws != self.ws {
                    return Err(CliError::usage(format!(
                        "--repo names workspace {ws:?}; this binding serves {:?}",
                        self.ws
                    )));
                }
                let kinds = self.client.kinds(&self.ws).await?.kinds;
                // An unknown prefix lists nothing rather than everything.
                Some(kinds.into_iter().find(|k| k.prefix.eq_ignore_ascii_case(&prefix)).map_or(prefix, |k| k.name))
            }
        };
        let items = self.list(statuses(a.state), kind, None).await?;
        emit(&self.items(&items))
    }

    async fn list_sub_items(&self, a: ListSubItemsArgs) -> Result<(), CliError> {
        let parent = self.get(&a.parent).await?.item_ref;
        let children = self.list(statuses(a.state), None, Some(&parent)).await?;
        emit(&self.items(&children))
    }

    async fn link_blocks(&self, a: LinkBlocksArgs) -> Result<(), CliError> {
        let r = self.check(&a.id)?;
        let blocker = self.check(&a.blocked_by)?;
        self.client.item(&self.ws, &blocker.to_string()).await.map_err(about(&blocker))?;
        // `add_blocked_by` adds in place: atomic, and a no-op when present.
        let patch = ItemPatch { add_blocked_by: vec![blocker.to_string()], ..ItemPatch::default() };
        self.client.update_item(&self.ws, &r.to_string(), &patch).await.map_err(about(&r))?;
        emit(&json!({
            "schema_version": SCHEMA_VERSION,
            "id": self.id(&r),
            "blocked_by": self.id(&blocker),
            "linked": true,
        }))
    }

    async fn add_sub_item(&self, a: AddSubItemArgs) -> Result<(), CliError> {
        let item = self.get(&a.id).await?;
        let parent = self.get(&a.parent).await?.item_ref;
        match &item.parent {
            Some(p) if p == &parent => {}
            // Like a tracker with one parent per item: moving it is a
            // separate decision, not a side effect of linking.
            Some(other) => {
                return Err(CliError::new(
                    Exit::Conflict,
                    format!("{} is already a sub-item of {}", self.id(&item.item_ref), self.id(other)),
                ));
            }
            None => {
                let patch = ItemPatch {
                    parent: Some(Some(parent.to_string())),
                    expected_updated_at: Some(item.updated_at),
                    ..ItemPatch::default()
                };
                self.client
                    .update_item(&self.ws, &item.item_ref.to_string(), &patch)
                    .await
                    .map_err(about(&item.item_ref))?;
            }
        }
        emit(&json!({
            "schema_version": SCHEMA_VERSION,
            "id": self.id(&item.item_ref),
            "parent_id": self.id(&parent),
            "linked": true,
        }))
    }

    fn lease_out(&self, r: &ItemRef, l: &Lease, requested: Option<u64>) -> LeaseOut {
        let secs = requested.unwrap_or(u64::from(l.ttl_seconds));
        LeaseOut {
            schema_version: SCHEMA_VERSION,
            id: self.id(r),
            holder: l.holder.clone(),
            acquired_at: l.acquired_at,
            renewed_at: l.renewed_at,
            ttl_hours: secs / 3600,
            ttl_minutes: secs % 3600 / 60,
            ttl_seconds: l.ttl_seconds,
            expires_at: l.expires_at,
            lease_comment_id: handle(l),
            session_id: l.session_id.clone(),
            epoch: l.epoch,
        }
    }

    /// Lease refusals name the holder (exit 7); a TTL the server refuses is
    /// a provider ceiling (exit 7 too: our own arguments were whole, so only
    /// the maximum can refuse them).
    fn lease_error(r: &ItemRef, e: ClientError) -> CliError {
        match &e {
            ClientError::Api { code: ErrorCode::InvalidTtl, message, .. } => {
                CliError::new(Exit::Conflict, format!("provider ceiling: {message}"))
            }
            _ => CliError::for_item(r, e),
        }
    }

    async fn claim(&self, a: ClaimArgs) -> Result<(), CliError> {
        let r = self.check(&a.id)?;
        let hours = a.ttl_hours.unwrap_or(self.binding.ttl_hours);
        let minutes = a.ttl_minutes.unwrap_or(self.binding.ttl_minutes);
        let secs = hours.checked_mul(3600).and_then(|h| h.checked_add(minutes * 60)).unwrap_or(u64::MAX);
        let max = u64::from(pad_core::lease::TTL_MAX_SECONDS);
        if secs > max {
            return Err(CliError::new(
                Exit::Conflict,
                format!("provider ceiling: pad leases last at most {max} s (24 h); asked for {secs} s"),
            ));
        }
        // A zero TTL is "born expired": pad's shortest lease (1 s), returned
        // once it has run out (docs/work-item-tracker.md, "Decisions").
        let born_expired = secs == 0;
        let body = ClaimBody {
            holder: None,
            session_id: a.session_id,
            ttl_seconds: Some(secs.max(1).into()),
            note: None,
            // The contract's claim takes or backs off; it never extends (L17).
            refresh: Some(false),
            max_hold_seconds: None,
        };
        let claimed = self.client.claim(&self.ws, &r.to_string(), &body).await.map_err(|e| Self::lease_error(&r, e))?;
        if born_expired {
            let ttl = (claimed.lease.expires_at - claimed.lease.renewed_at).to_std().unwrap_or(Duration::from_secs(1));
            tokio::time::sleep(ttl + Duration::from_millis(100)).await;
        }
        emit(&self.lease_out(&r, &claimed.lease, Some(secs)))
    }

    async fn renew(&self, a: HandleArgs) -> Result<(), CliError> {
        let r = self.check(&a.id)?;
        let body =
            RenewBody { epoch: None, lease_id: Some(a.lease_comment_id), holder: None, ttl_seconds: None, note: None };
        let renewed = self.client.renew(&self.ws, &r.to_string(), &body).await.map_err(|e| Self::lease_error(&r, e))?;
        emit(&self.lease_out(&r, &renewed.lease, None))
    }

    async fn release(&self, a: HandleArgs) -> Result<(), CliError> {
        let r = self.check(&a.id)?;
        let h = a.lease_comment_id;
        let body = ReleaseBody {
            holder: None,
            epoch: None,
            lease_id: Some(h),
            force: false,
            reason: None,
            succeeded: false,
            next: None,
        };
        let refused = match self.client.release(&self.ws, &r.to_string(), &body).await {
            Ok(rel) if rel.released => return self.released(&r, h, true, rel.reason),
            Ok(rel) => CliError::new(Exit::Conflict, format!("lease {h} is not a lease of {r} ({})", rel.reason)),
            Err(e @ ClientError::Api { code: ErrorCode::LeaseLost, .. }) => CliError::for_item(&r, e),
            Err(e) => return Err(CliError::for_item(&r, e)),
        };
        // This item's last lease, already ended, blocks nobody: a no-op.
        // Any other handle (another item's, a stale one under a newer
        // claim) is refused.
        let item = self.client.item(&self.ws, &r.to_string()).await.map_err(about(&r))?;
        match (&item.lease, &item.last_lease) {
            (None, Some(last)) if last.lease_id == h => {
                self.released(&r, h, false, format!("lease {h} already ended ({})", last.ended))
            }
            _ => Err(refused),
        }
    }

    fn released(&self, r: &ItemRef, h: i64, released: bool, reason: String) -> Result<(), CliError> {
        emit(&json!({
            "schema_version": SCHEMA_VERSION,
            "id": self.id(r),
            "lease_comment_id": h,
            "released": released,
            "reason": reason,
        }))
    }

    /// pad has no reaper: an expired lease already holds nothing. Reclaim
    /// writes nothing and says whether the item's last lease ended by
    /// expiry (docs/work-item-tracker.md, "Decisions").
    async fn reclaim(&self, id: &WitId) -> Result<(), CliError> {
        let item = self.get(id).await?;
        let (reclaimed, reason) = match (&item.lease, &item.last_lease) {
            (Some(l), _) => {
                (false, format!("lease live: {} held by {} until {}", l.lease_id, l.holder, l.expires_at.to_rfc3339()))
            }
            (None, Some(last)) if last.ended == LeaseEnd::Expired => (
                true,
                format!(
                    "lease {} of {} expired at {}; pad ended it then, and the item is free to claim",
                    last.lease_id,
                    last.holder,
                    last.ended_at.to_rfc3339()
                ),
            ),
            (None, Some(last)) => (
                false,
                format!(
                    "lease {} was {} at {}; nothing to reclaim",
                    last.lease_id,
                    last.ended,
                    last.ended_at.to_rfc3339()
                ),
            ),
            (None, None) => (false, "never leased; nothing to reclaim".to_string()),
        };
        emit(&json!({
            "schema_version": SCHEMA_VERSION,
            "id": self.id(&item.item_ref),
            "reclaimed": reclaimed,
            "reason": reason,
        }))
    }

    async fn label_provenance(&self, a: LabelProvenanceArgs) -> Result<(), CliError> {
        let item = self.get(&a.id).await?;
        let r = &item.item_ref;
        let versions = self.client.history(&self.ws, &r.to_string()).await.map_err(about(r))?.versions;
        let members = self.client.members(&self.ws).await?.members;
        let labels_of = |v: &serde_json::Value, side: &str| -> Vec<String> {
            v.pointer(&format!("/labels/{side}"))
                .and_then(|l| serde_json::from_value::<Vec<String>>(l.clone()).ok())
                .unwrap_or_default()
        };
        let mut rows = Vec::new();
        for label in &a.labels {
            // The newest version that added the label (history is newest first).
            let applied = versions.iter().find(|v| {
                labels_of(&v.changes, "to").contains(label) && !labels_of(&v.changes, "from").contains(label)
            });
            let row = match applied {
                _ if !item.labels.contains(label) => ProvenanceRow {
                    label: label.clone(),
                    actor: None,
                    permission: None,
                    role: None,
                    trusted: false,
                    reason: Some("the item does not carry this label".into()),
                },
                None => ProvenanceRow {
                    label: label.clone(),
                    actor: None,
                    permission: None,
                    role: None,
                    trusted: false,
                    reason: Some("no member's edit applied this label (pad may have set it, e.g. quarantine)".into()),
                },
                Some(v) => {
                    let role = members.iter().find(|m| m.email == v.actor).map(|m| m.role);
                    let permission = role.map(|r| match r {
                        Role::Owner => "admin",
                        Role::Editor => "write",
                        Role::Viewer => "read",
                    });
                    let trusted = matches!(role, Some(Role::Owner | Role::Editor));
                    let reason = match role {
                        None => Some(format!("{} is no longer a member", v.actor)),
                        Some(Role::Viewer) => Some(format!("{} is a viewer", v.actor)),
                        Some(_) => None,
                    };
                    ProvenanceRow {
                        label: label.clone(),
                        actor: Some(v.actor.clone()),
                        permission,
                        role,
                        trusted,
                        reason,
                    }
                }
            };
            rows.push(row);
        }
        emit(&json!({
            "schema_version": SCHEMA_VERSION,
            "id": self.id(r),
            "admitted": rows.iter().all(|row| row.trusted),
            "labels": rows,
        }))
    }
}
