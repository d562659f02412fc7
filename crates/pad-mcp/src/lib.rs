//! pad as Model Context Protocol tools (SPEC §8), for AI coding agents.
//!
//! Every tool is one call of the typed HTTP client, so MCP sees exactly the
//! API's behaviour, authorization and error codes. `pad mcp` serves the tools
//! over stdio with the CLI's profile ([`serve_stdio`]); `pad serve` mounts
//! [`http_service`] at `POST /mcp`, where each call runs with the caller's own
//! bearer token against the serving instance. The MCP SDK is confined to this
//! crate.

mod args;

use std::sync::Arc;

use pad_client::{Client, ClientError, Url};
use pad_core::api::{ClaimBody, ClaimNextBody, ListQuery, NewComment, ReleaseBody, RenewBody};
use pad_core::{ItemPatch, NewItem};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::Serialize;
use serde_json::json;

pub use args::*;

const INSTRUCTIONS: &str = "pad is a work tracker whose items are claimed with expiring leases. \
To work on something: call pad_claim_next (or pad_item_claim for a specific ref) with a holder name for yourself; \
you then hold the item exclusively until the lease expires (default 15 minutes). \
While you work, call pad_item_renew with the lease's epoch at least every third of the TTL, or the lease expires and \
someone else may take the item. When done, update the item (status done, with lease_epoch to fence the write) and \
call pad_item_release. A lease_held error means another worker holds the item: its details name the holder and when \
the lease expires; pick other work (pad_claim_next) instead of waiting. A lease_lost error means your lease expired or \
was taken over: stop working on that item. Skip items labelled needs-human (pad_claim_next with autonomous: true does).";

/// Where tool calls go: a fixed client (stdio, the CLI's profile), or the
/// serving instance with each HTTP caller's own token.
#[derive(Clone)]
enum Connection {
    Fixed(Client),
    PerCaller(Url),
}

#[derive(Clone)]
pub struct PadTools {
    connection: Connection,
    default_workspace: String,
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

fn error_envelope(e: &ClientError) -> serde_json::Value {
    match e {
        ClientError::Api { code, message, details, .. } => {
            json!({ "error": { "code": code, "message": message, "details": details } })
        }
        ClientError::Unavailable(m) => json!({ "error": { "code": "unavailable", "message": m, "details": {} } }),
        ClientError::Protocol(m) => json!({ "error": { "code": "internal_error", "message": m, "details": {} } }),
    }
}

fn unauthorized() -> CallToolResult {
    CallToolResult::structured_error(
        json!({ "error": { "code": "unauthorized", "message": "missing bearer token", "details": {} } }),
    )
}

impl PadTools {
    pub fn new(client: Client, default_workspace: impl Into<String>) -> Self {
        Self {
            connection: Connection::Fixed(client),
            default_workspace: default_workspace.into(),
            tool_router: Self::tool_router(),
        }
    }

    fn per_caller(base: Url, default_workspace: impl Into<String>) -> Self {
        Self {
            connection: Connection::PerCaller(base),
            default_workspace: default_workspace.into(),
            tool_router: Self::tool_router(),
        }
    }

    /// The client for this call: over HTTP, the caller's bearer token.
    fn client(&self, ctx: &RequestContext<RoleServer>) -> Result<Client, CallToolResult> {
        match &self.connection {
            Connection::Fixed(c) => Ok(c.clone()),
            Connection::PerCaller(base) => {
                let token = ctx
                    .extensions
                    .get::<http::request::Parts>()
                    .and_then(|p| p.headers.get(http::header::AUTHORIZATION))
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .ok_or_else(unauthorized)?;
                Client::new(base.clone(), token.trim())
                    .map_err(|e| CallToolResult::structured_error(error_envelope(&e)))
            }
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
        description = "Show one item by ref (e.g. TASK-5): title, body, status, priority, labels, links, and its live lease if any."
    )]
    async fn pad_item_show(
        &self,
        Parameters(a): Parameters<RefArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        with_client!(self, ctx, |c| c.item(self.ws(&a.workspace), &a.item_ref))
    }

    #[tool(description = "Create an item. Returns it, with its new ref.")]
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

    #[tool(description = "Add a comment (markdown) to an item: progress reports, findings, questions for a human.")]
    async fn pad_item_comment(
        &self,
        Parameters(a): Parameters<CommentArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let body = NewComment { body: a.body.clone() };
        with_client!(self, ctx, |c| c.add_comment(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
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
        description = "Claim an item's execution lease: exclusive, expiring ownership for ttl_seconds (default 900). Claiming again with the same holder and session refreshes it (refreshed: true). Fails with lease_held when another worker holds it: details.holder and details.expires_in_seconds say who and for how long; choose other work. Remember the returned lease.epoch for renew, fenced updates and release. previous_note carries the last holder's handoff note."
    )]
    async fn pad_item_claim(
        &self,
        Parameters(a): Parameters<ClaimArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let body = ClaimBody {
            holder: a.holder.clone(),
            session_id: a.session_id.clone(),
            ttl_seconds: a.ttl_seconds.map(Into::into),
            note: a.note.clone(),
            refresh: None,
        };
        with_client!(self, ctx, |c| c.claim(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
        description = "Extend your live lease (heartbeat). Call it before a third of the TTL is left. Needs the epoch from your claim. lease_lost means the lease already expired or another worker took over: stop working on the item. A note records progress for whoever claims next."
    )]
    async fn pad_item_renew(
        &self,
        Parameters(a): Parameters<RenewArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let body = RenewBody {
            epoch: Some(a.epoch),
            lease_id: None,
            holder: a.holder.clone(),
            ttl_seconds: a.ttl_seconds.map(Into::into),
            note: a.note.clone(),
        };
        with_client!(self, ctx, |c| c.renew(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
        description = "Release your lease when you stop working on an item, so others can claim it at once. Idempotent: released: false means there was no live lease. Refused with lease_held if another worker holds it."
    )]
    async fn pad_item_release(
        &self,
        Parameters(a): Parameters<ReleaseArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let body = ReleaseBody { holder: a.holder.clone(), epoch: a.epoch, ..Default::default() };
        with_client!(self, ctx, |c| c.release(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
        description = "Atomically pick the best ready item matching the filter (highest priority, then oldest) and claim its lease for you. Concurrent callers never get the same item. Returns item: null when nothing is ready. Set autonomous: true to skip items marked needs-human."
    )]
    async fn pad_claim_next(
        &self,
        Parameters(a): Parameters<ClaimNextArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let body = ClaimNextBody {
            filter: a.filter.filter(),
            holder: a.holder.clone(),
            session_id: a.session_id.clone(),
            ttl_seconds: a.ttl_seconds.map(Into::into),
            note: a.note.clone(),
        };
        with_client!(self, ctx, |c| c.claim_next(self.ws(&a.workspace), &body))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for PadTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(INSTRUCTIONS)
    }
}

/// `pad mcp`: the tools over stdin/stdout until the client hangs up.
pub async fn serve_stdio(client: Client, default_workspace: String) -> std::io::Result<()> {
    let service = PadTools::new(client, default_workspace)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    service.waiting().await.map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(())
}

/// The streamable-HTTP service for `POST /mcp`: stateless (no sessions), so
/// any instance behind a load balancer can answer any call. `self_url` is the
/// serving instance, which each call reaches with the caller's own token.
pub fn http_service(self_url: Url) -> StreamableHttpService<PadTools, NeverSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        // pad authenticates every call itself; the Host allow-list would
        // refuse any deployment not reached as localhost.
        .disable_allowed_hosts();
    StreamableHttpService::new(
        move || Ok(PadTools::per_caller(self_url.clone(), "default")),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}
