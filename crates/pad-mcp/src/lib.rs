//! pad as Model Context Protocol tools (docs/agents.md), for AI coding agents.
//!
//! Every tool is one call of [`PadApi`], so MCP sees exactly the API's
//! behaviour, authorization and error codes. `pad mcp` serves the tools over
//! stdio with the CLI's profile and the typed HTTP client ([`serve_stdio`]);
//! `pad serve` mounts [`http_service`] at `POST /mcp`, where each call runs
//! in-process as the caller the server authenticated once for the request
//! ([`CallerApi`]). The MCP SDK is confined to this crate.

mod api;
mod args;
pub mod prime;

use std::sync::Arc;

use pad_client::{Client, ClientError};
use pad_core::api::{
    ClaimBody, ClaimNextBody, CompleteBody, ErrorBody, ErrorCode, ErrorEnvelope, FailBody, ListQuery, NewComment,
    ReleaseBody, RenewBody, RenewEntry, RenewLeasesBody,
};
use pad_core::{ItemPatch, NewItem};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    PaginatedRequestParams, Prompt, PromptMessage, Role, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::Serialize;
use serde_json::json;

pub use api::{CallerApi, PadApi};
pub use args::*;

const INSTRUCTIONS: &str = "pad is a work tracker whose items are claimed with expiring leases. \
Start with pad_prime: it says who you are, the leases you hold and the ready work. \
To take work call pad_claim_next with autonomous: true (or pad_item_claim for a specific ref); you need not name a holder: \
this session has its own, so no other agent session can share your lease. You then hold the item exclusively until the \
lease expires (default 15 minutes). While you work, call pad_item_renew with the lease's epoch at least every third of \
the TTL, or the lease expires and someone else may take the item. When done, call pad_item_complete with the epoch \
(status done and the lease ended, in one fenced step). If the attempt failed, call pad_item_fail with the epoch and a \
note saying what went wrong: the item is retried later and quarantined after repeated failures. \
A lease_held error means another worker holds the item: its details name the holder and when the lease expires; pick \
other work (pad_claim_next) instead of waiting. A lease_lost error means your lease expired or was taken over: stop \
working on that item and write nothing more to it. Never work on an item without a live lease. \
Skip items labelled needs-human (pad_claim_next with autonomous: true does).";

/// Who a session is when a call names no holder or session (docs/agents.md,
/// "No accidental shared leases"): each `pad mcp` process has its own, so two
/// agent sessions of one user never refresh each other's claim (L3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionIdentity {
    pub holder: String,
    pub session_id: String,
}

impl SessionIdentity {
    /// A fresh session id, and the holder label given or `<runtime>@<host>-<short id>`.
    pub fn new(holder: Option<String>, runtime: &str, host: &str) -> Self {
        let session_id = new_session_id();
        let holder = holder.unwrap_or_else(|| default_holder(runtime, host, &session_id));
        SessionIdentity { holder, session_id }
    }
}

/// 16 hex digits: unique enough to tell sessions apart, short enough to read.
pub fn new_session_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// `claude@build-box-3f9a1c`: which agent, where, and which of its sessions.
pub fn default_holder(runtime: &str, host: &str, session_id: &str) -> String {
    let host: String = host.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.')).take(40).collect();
    let host = if host.is_empty() { "localhost".to_string() } else { host };
    format!("{runtime}@{host}-{}", &session_id[..session_id.len().min(6)])
}

/// Where tool calls go: a fixed API (stdio: the client with the CLI's
/// profile), or the one the server attached to each HTTP request.
#[derive(Clone)]
enum Connection {
    Fixed(Arc<dyn PadApi>),
    PerRequest,
}

#[derive(Clone)]
pub struct PadTools {
    connection: Connection,
    default_workspace: String,
    /// Over stdio, the process's identity. Over stateless HTTP there is no
    /// session to hang one on: a claim that names no holder gets a fresh
    /// identity, returned in its lease, which later calls pass back.
    identity: Option<SessionIdentity>,
    tool_router: ToolRouter<Self>,
}

/// The tool result for an API answer: the JSON as structured content, or the
/// API's error envelope (same `code` and `details`) as a tool error.
fn answer<T: Serialize>(result: Result<T, ClientError>) -> Result<CallToolResult, ErrorData> {
    Ok(match result {
        Ok(value) => CallToolResult::structured(serde_json::to_value(value).unwrap_or_default()),
        Err(e) => CallToolResult::structured_error(error_envelope(&e)),
    })
}

/// The one mapping from an API answer to a tool error: the API's envelope,
/// the message followed by the next step.
fn error_envelope(e: &ClientError) -> serde_json::Value {
    match e {
        ClientError::Api { code, message, details, .. } => envelope(*code, message, details.clone()),
        ClientError::Unavailable(m) => envelope(ErrorCode::Unavailable, m, json!({})),
        ClientError::Protocol(m) => envelope(ErrorCode::InternalError, m, json!({})),
    }
}

/// `{"error": {code, message, details}}`, as the API writes it.
fn envelope(code: ErrorCode, message: &str, details: serde_json::Value) -> serde_json::Value {
    let message = match next_step(code) {
        Some(next) => format!("{message}. Next: {next}"),
        None => message.to_string(),
    };
    serde_json::to_value(ErrorEnvelope { error: ErrorBody { code, message, details } }).unwrap_or_default()
}

/// What an agent should do after each refusal, appended to the API's message.
fn next_step(code: ErrorCode) -> Option<&'static str> {
    Some(match code {
        ErrorCode::LeaseHeld => {
            "another worker holds this item (details.holder, details.expires_in_seconds); do not wait for it, \
             call pad_claim_next with autonomous: true for other work"
        }
        ErrorCode::LeaseLost => {
            "your lease is gone (expired or broken); stop working on this item and write nothing more to it, \
             then call pad_claim_next for other work"
        }
        ErrorCode::UpdateConflict => "someone changed the item since you read it; call pad_item_show and retry",
        ErrorCode::NotFound => "check the ref or workspace with pad_item_list or pad_frontier",
        ErrorCode::Unauthorized => "the token was refused; a person must run `pad auth login` or set PAD_TOKEN",
        ErrorCode::Forbidden => "your role does not allow this; ask a workspace owner, or only read",
        ErrorCode::InvalidTtl => "ttl_seconds must be between 1 and 86400",
        ErrorCode::RateLimited | ErrorCode::Unavailable => "wait a few seconds and retry the same call",
        _ => return None,
    })
}

fn unauthorized() -> CallToolResult {
    CallToolResult::structured_error(envelope(ErrorCode::Unauthorized, "missing bearer token", json!({})))
}

impl PadTools {
    pub fn new(client: Client, default_workspace: impl Into<String>, identity: SessionIdentity) -> Self {
        Self {
            connection: Connection::Fixed(Arc::new(client)),
            default_workspace: default_workspace.into(),
            identity: Some(identity),
            tool_router: Self::tool_router(),
        }
    }

    fn per_request(default_workspace: impl Into<String>) -> Self {
        Self {
            connection: Connection::PerRequest,
            default_workspace: default_workspace.into(),
            identity: None,
            tool_router: Self::tool_router(),
        }
    }

    /// The holder and session for a claim: as given, else the session's;
    /// over HTTP without a holder, a fresh identity of the claim's own.
    fn claimant(&self, holder: &Option<String>, session_id: &Option<String>) -> (String, String) {
        let identity = self.identity.clone().unwrap_or_else(|| SessionIdentity::new(None, "mcp", &hostname()));
        (holder.clone().unwrap_or(identity.holder), session_id.clone().unwrap_or(identity.session_id))
    }

    /// The holder for renew, release and complete: as given, else the
    /// session's. Over HTTP the caller must say, or the server would take
    /// its email and refuse with a puzzling lease_held.
    fn holder_for(&self, given: &Option<String>) -> Result<Option<String>, CallToolResult> {
        match (given, &self.identity) {
            (Some(h), _) => Ok(Some(h.clone())),
            (None, Some(identity)) => Ok(Some(identity.holder.clone())),
            (None, None) => Err(CallToolResult::structured_error(envelope(
                ErrorCode::ValidationFailed,
                "holder is required over HTTP, which keeps no session. Next: pass the holder your claim returned \
                 (lease.holder), with its epoch",
                json!({ "field": "holder" }),
            ))),
        }
    }

    /// The API for this call: over HTTP, the one the server attached to the
    /// request after authenticating its caller (missing only if the server
    /// mounted the service without doing so).
    fn client(&self, ctx: &RequestContext<RoleServer>) -> Result<Arc<dyn PadApi>, CallToolResult> {
        match &self.connection {
            Connection::Fixed(api) => Ok(api.clone()),
            Connection::PerRequest => ctx
                .extensions
                .get::<http::request::Parts>()
                .and_then(|p| p.extensions.get::<CallerApi>())
                .map(|c| c.0.clone())
                .ok_or_else(unauthorized),
        }
    }

    fn ws<'a>(&'a self, given: &'a Option<String>) -> &'a str {
        given.as_deref().unwrap_or(&self.default_workspace)
    }
}

/// Runs a tool body with the call's client, turning a missing token into a tool error.
macro_rules! with_client {
    ($self:ident, $ctx:ident, |$c:ident| $body:expr) => {
        match $self.client(&$ctx) {
            Ok($c) => answer($body.await),
            Err(refusal) => Ok(refusal),
        }
    };
}

#[tool_router]
impl PadTools {
    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        description = "List items in a workspace, oldest first, with filters. An item's `lease` is present only while someone holds it."
    )]
    async fn pad_item_list(
        &self,
        Parameters(a): Parameters<ListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let q = ListQuery {
            status: a.status.clone(),
            kind: a.kind.clone(),
            label: a.label.clone(),
            leased: a.leased,
            q: a.q.clone(),
            limit: a.limit,
            cursor: a.cursor.clone(),
            ..Default::default()
        };
        with_client!(self, ctx, |c| c.list_items(self.ws(&a.workspace), &q))
    }

    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        description = "Show one item by ref (e.g. TASK-5): title, body, status, priority, labels, links, and its live lease if any."
    )]
    async fn pad_item_show(
        &self,
        Parameters(a): Parameters<RefArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        with_client!(self, ctx, |c| c.item(self.ws(&a.workspace), &a.item_ref))
    }

    #[tool(
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        ),
        description = "Create an item. Returns it, with its new ref."
    )]
    async fn pad_item_create(
        &self,
        Parameters(a): Parameters<CreateArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let new = NewItem {
            title: a.title.clone(),
            body: a.body.clone().unwrap_or_default(),
            kind: a.kind.clone(),
            priority: a.priority,
            labels: a.labels.clone(),
            parent: a.parent.clone(),
            blocked_by: a.blocked_by.clone(),
            assignee: a.assignee.clone(),
            not_before: None,
        };
        with_client!(self, ctx, |c| c.create_item(self.ws(&a.workspace), &new))
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        description = "Update an item's content or status. Pass lease_epoch (from your claim) so the write is refused with lease_lost if you no longer hold the lease; pass expected_updated_at to refuse with update_conflict if someone else edited it since you read it."
    )]
    async fn pad_item_update(
        &self,
        Parameters(a): Parameters<UpdateArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let patch = ItemPatch {
            title: a.title.clone(),
            body: a.body.clone(),
            status: a.status,
            priority: a.priority,
            add_labels: a.add_labels.clone(),
            remove_labels: a.remove_labels.clone(),
            expected_updated_at: a.expected_updated_at,
            lease_epoch: a.lease_epoch,
            ..Default::default()
        };
        with_client!(self, ctx, |c| c.update_item(self.ws(&a.workspace), &a.item_ref, &patch))
    }

    #[tool(
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        ),
        description = "Add a comment (markdown) to an item: progress reports, findings, questions for a human."
    )]
    async fn pad_item_comment(
        &self,
        Parameters(a): Parameters<CommentArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let body = NewComment { body: a.body.clone() };
        with_client!(self, ctx, |c| c.add_comment(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        description = "The ready work: open items that are not blocked and not leased, highest priority first, then oldest. Does not claim anything; use pad_claim_next to take one atomically."
    )]
    async fn pad_frontier(
        &self,
        Parameters(a): Parameters<FrontierArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let q = a.filter.query(a.limit);
        with_client!(self, ctx, |c| c.frontier(self.ws(&a.workspace), &q))
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        description = "Claim an item's execution lease: exclusive, expiring ownership for ttl_seconds (default 900). Leave holder and session_id out: this session has its own, distinct from every other agent session. Claiming again in the same session refreshes it (refreshed: true). Fails with lease_held when another worker holds it: details.holder and details.expires_in_seconds say who and for how long; choose other work. Remember the returned lease.epoch for renew, fenced updates and release. previous_note carries the last holder's handoff note."
    )]
    async fn pad_item_claim(
        &self,
        Parameters(a): Parameters<ClaimArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let (holder, session_id) = self.claimant(&a.holder, &a.session_id);
        let body = ClaimBody {
            holder: Some(holder),
            session_id: Some(session_id),
            ttl_seconds: a.ttl_seconds.map(Into::into),
            note: a.note.clone(),
            refresh: None,
            max_hold_seconds: a.max_hold_seconds,
        };
        with_client!(self, ctx, |c| c.claim(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        description = "Extend your live lease (heartbeat). Call it before a third of the TTL is left. Needs the epoch from your claim. lease_lost means the lease already expired or another worker took over: stop working on the item. A note records progress for whoever claims next."
    )]
    async fn pad_item_renew(
        &self,
        Parameters(a): Parameters<RenewArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let holder = match self.holder_for(&a.holder) {
            Ok(h) => h,
            Err(refusal) => return Ok(refusal),
        };
        let body = RenewBody {
            epoch: Some(a.epoch),
            lease_id: None,
            holder,
            ttl_seconds: a.ttl_seconds.map(Into::into),
            note: a.note.clone(),
        };
        with_client!(self, ctx, |c| c.renew(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        description = "Release your lease when you stop working on an item, so others can claim it at once. Idempotent: released: false means there was no live lease. Refused with lease_held if another worker holds it."
    )]
    async fn pad_item_release(
        &self,
        Parameters(a): Parameters<ReleaseArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let holder = match self.holder_for(&a.holder) {
            Ok(h) => h,
            Err(refusal) => return Ok(refusal),
        };
        let body = ReleaseBody { holder, epoch: a.epoch, ..Default::default() };
        with_client!(self, ctx, |c| c.release(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        ),
        description = "Atomically pick the best ready item matching the filter (highest priority, then oldest) and claim its lease for you. Concurrent callers never get the same item. Returns item: null when nothing is ready. Set autonomous: true to skip items marked needs-human. count claims several at once (see grants); wait_seconds waits for work when none is ready."
    )]
    async fn pad_claim_next(
        &self,
        Parameters(a): Parameters<ClaimNextArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let (holder, session_id) = self.claimant(&a.holder, &a.session_id);
        let body = ClaimNextBody {
            filter: a.filter.filter(),
            holder: Some(holder),
            session_id: Some(session_id),
            ttl_seconds: a.ttl_seconds.map(Into::into),
            note: a.note.clone(),
            max_hold_seconds: a.max_hold_seconds,
            count: a.count,
            wait_seconds: a.wait_seconds,
        };
        with_client!(self, ctx, |c| c.claim_next(self.ws(&a.workspace), &body))
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        description = "Heartbeat for many leases at once: extends each live lease you hold (by ref and epoch, at most 100). Each answer stands alone, in the order asked: lease when renewed, error (e.g. lease_lost: stop working on that item) when not."
    )]
    async fn pad_leases_renew(
        &self,
        Parameters(a): Parameters<RenewLeasesArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let holder = match self.holder_for(&a.holder) {
            Ok(h) => h,
            Err(refusal) => return Ok(refusal),
        };
        let leases = a
            .leases
            .iter()
            .map(|l| RenewEntry {
                item_ref: l.item_ref.clone(),
                epoch: Some(l.epoch),
                lease_id: None,
                holder: holder.clone(),
                ttl_seconds: l.ttl_seconds.map(Into::into),
                note: l.note.clone(),
            })
            .collect();
        let body = RenewLeasesBody { leases };
        with_client!(self, ctx, |c| c.renew_leases(self.ws(&a.workspace), &body))
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false),
        description = "Finish an item you hold: sets its status (default done) and ends your lease in one step, fenced by the lease's epoch. lease_lost means the lease already expired or was taken over: nothing was changed; stop working on the item."
    )]
    async fn pad_item_complete(
        &self,
        Parameters(a): Parameters<CompleteArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let holder = match self.holder_for(&a.holder) {
            Ok(h) => h,
            Err(refusal) => return Ok(refusal),
        };
        let body = CompleteBody { epoch: Some(a.epoch), lease_id: None, holder, status: a.status };
        with_client!(self, ctx, |c| c.complete(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false),
        description = "Give up on an item you hold: ends your lease and counts a failed attempt, fenced by the lease's epoch. Say in note what went wrong and what is left: the next worker reads it. The item is retried later (backoff); after repeated failures it is quarantined (labelled needs-human, quarantined: true). Use it instead of pad_item_release when the attempt failed."
    )]
    async fn pad_item_fail(
        &self,
        Parameters(a): Parameters<FailArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let holder = match self.holder_for(&a.holder) {
            Ok(h) => h,
            Err(refusal) => return Ok(refusal),
        };
        let body = FailBody { epoch: Some(a.epoch), lease_id: None, holder, note: a.note.clone(), max_failures: None };
        with_client!(self, ctx, |c| c.fail(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        description = "Your session brief: who you are (user, holder, workspace, server), the leases you hold with time left, the top of the ready work, how many items wait for a human, and the tools to use. Call it first."
    )]
    async fn pad_prime(
        &self,
        Parameters(a): Parameters<PrimeArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let client = match self.client(&ctx) {
            Ok(c) => c,
            Err(refusal) => return Ok(refusal),
        };
        Ok(match self.prime(client.as_ref(), self.ws(&a.workspace), a.holder.as_deref()).await {
            Ok(p) => {
                let mut result = CallToolResult::structured(serde_json::to_value(&p).unwrap_or_default());
                result.content = vec![rmcp::model::ContentBlock::text(p.to_markdown())];
                result
            }
            Err(e) => CallToolResult::structured_error(error_envelope(&e)),
        })
    }
}

impl PadTools {
    async fn prime(&self, api: &dyn PadApi, ws: &str, holder: Option<&str>) -> Result<prime::Prime, ClientError> {
        let holder = holder.or(self.identity.as_ref().map(|i| i.holder.as_str()));
        let session_id = self.identity.as_ref().map(|i| i.session_id.as_str());
        prime::gather(api, prime::PrimeFor { workspace: ws, holder, session_id }).await
    }
}

/// The machine's name for default holders: /proc on Linux, else $HOSTNAME.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for PadTools {
    fn get_info(&self) -> ServerConfig {
        // The server introduces itself as pad, at pad's version (one version
        // for the whole workspace), over stdio and `POST /mcp` alike.
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_prompts().build())
            .with_server_info(Implementation::new("pad", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompt = Prompt::new(
            PRIME_PROMPT,
            Some("Start a work session: your identity, leases, the ready work and how to take it (pad prime)"),
            None,
        );
        Ok(ListPromptsResult::with_all_items(vec![prompt]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != PRIME_PROMPT {
            return Err(ErrorData::invalid_params(
                format!("no prompt {:?}; the only prompt is {PRIME_PROMPT}", request.name),
                None,
            ));
        }
        let client = self.client(&ctx).map_err(|_| ErrorData::invalid_request("missing bearer token", None))?;
        let brief = match self.prime(client.as_ref(), &self.default_workspace, None).await {
            Ok(p) => p.to_markdown(),
            Err(e) => format!("pad could not be reached to prepare the brief: {e}"),
        };
        let messages = vec![PromptMessage::new_text(Role::User, brief)];
        Ok(GetPromptResult::new(messages).with_description("pad session brief").into())
    }
}

/// The prompt (and tool) that briefs an agent at session start.
pub const PRIME_PROMPT: &str = "pad_prime";

/// `pad mcp`: the tools over stdin/stdout until the client hangs up.
pub async fn serve_stdio(client: Client, default_workspace: String, identity: SessionIdentity) -> std::io::Result<()> {
    let service = PadTools::new(client, default_workspace, identity)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    service.waiting().await.map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(())
}

/// The streamable-HTTP service for `POST /mcp`: stateless (no sessions), so
/// any instance behind a load balancer can answer any call. The server must
/// authenticate each request and attach the caller's API ([`CallerApi`]) to
/// its extensions; a request without one gets `unauthorized`.
pub fn http_service() -> StreamableHttpService<PadTools, NeverSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        // pad authenticates every call itself; the Host allow-list would
        // refuse any deployment not reached as localhost.
        .disable_allowed_hosts();
    StreamableHttpService::new(
        || Ok(PadTools::per_request("default")),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_session_has_its_own_id_and_a_readable_default_holder() {
        let a = SessionIdentity::new(None, "claude", "build box!");
        let b = SessionIdentity::new(None, "claude", "build box!");
        assert_ne!(a.session_id, b.session_id);
        assert_ne!(a.holder, b.holder);
        assert_eq!(a.holder, format!("claude@buildbox-{}", &a.session_id[..6]));
        // A shared PAD_HOLDER keeps the label; the session ids still tell the sessions apart.
        let (c, d) =
            (SessionIdentity::new(Some("ci".into()), "x", "h"), SessionIdentity::new(Some("ci".into()), "x", "h"));
        assert_eq!((c.holder.as_str(), d.holder.as_str()), ("ci", "ci"));
        assert_ne!(c.session_id, d.session_id);
        assert_eq!(default_holder("codex", "", "abcdef0123"), "codex@localhost-abcdef");
    }

    #[test]
    fn lease_errors_tell_the_agent_what_to_do_next() {
        let e = ClientError::Api {
            status: 409,
            code: ErrorCode::LeaseLost,
            message: "lease lost".into(),
            details: json!({}),
            retry_after: None,
        };
        let message = error_envelope(&e)["error"]["message"].as_str().unwrap().to_string();
        assert!(message.starts_with("lease lost. Next: ") && message.contains("stop working"), "{message}");
    }
}
