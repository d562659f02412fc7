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
mod errors;
mod identity;
pub mod prime;
mod tools;

use std::sync::Arc;

use pad_client::{Client, ClientError};
use pad_core::api::{ClaimNextBody, ErrorBody, ErrorCode};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolResult, GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    PaginatedRequestParams, Prompt, PromptMessage, Role, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool_handler};
use serde_json::json;

pub use api::{CallerApi, PadApi};
pub use args::*;
use errors::unauthorized;
pub use identity::{SessionIdentity, default_holder, hostname, new_session_id};

const INSTRUCTIONS: &str = "pad is a work tracker whose items are claimed with expiring leases. \
Start with pad_prime: it says who you are, the leases you hold and the ready work. \
To take work call pad_claim_next with autonomous: true (or pad_item_claim for a specific ref); you need not name a holder: \
this session has its own, so no other agent session can share your lease. You then hold the item exclusively until the \
lease expires (default 15 minutes). While you work, call pad_item_renew with the lease's epoch (or its lease_id) at least \
every third of the TTL, or the lease expires and someone else may take the item. When done, call pad_item_complete with \
the epoch or lease_id (status done and the lease ended, in one fenced step). If the attempt failed, call pad_item_fail \
with the epoch or lease_id and a note saying what went wrong: the item is retried later and quarantined after \
repeated failures. To go on with more work, give either of them next: {autonomous: true}, and the same call claims \
your next item (answer: next). \
A lease_held error means another worker holds the item: its details name the holder and when the lease expires; pick \
other work (pad_claim_next) instead of waiting. A lease_lost error means your lease expired or was taken over: stop \
working on that item and write nothing more to it. Never work on an item without a live lease. \
Skip items labelled needs-human (pad_claim_next with autonomous: true does).";

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

    /// The claim a lease's end carries in `next` (docs/api.md, "The next item
    /// in the same call"): under the end's holder, with this session's id
    /// when it has one.
    ///
    /// A TTL inside it that is not a whole number is refused as the API
    /// refuses it, named `next.ttl_seconds`.
    fn next_claim(
        &self, next: &Option<args::NextArgs>, holder: &Option<String>,
    ) -> Result<Option<ClaimNextBody>, ErrorBody> {
        let Some(n) = next else { return Ok(None) };
        Ok(Some(ClaimNextBody {
            filter: n.filter.filter(),
            holder: holder.clone(),
            session_id: self.identity.as_ref().map(|i| i.session_id.clone()),
            ttl_seconds: args::ttl(&n.ttl_seconds).map_err(|e| e.within("next"))?,
            max_hold_seconds: n.max_hold_seconds,
            ..ClaimNextBody::default()
        }))
    }

    /// The holder for renew, release and complete: as given, else the
    /// session's. Over HTTP the caller must say, or the server would take
    /// its email and refuse with a puzzling lease_held.
    fn holder_for(&self, given: &Option<String>) -> Result<Option<String>, ErrorBody> {
        match (given, &self.identity) {
            (Some(h), _) => Ok(Some(h.clone())),
            (None, Some(identity)) => Ok(Some(identity.holder.clone())),
            (None, None) => Err(ErrorBody {
                code: ErrorCode::ValidationFailed,
                message: "holder is required over HTTP, which keeps no session. Next: pass the holder your claim \
                          returned (lease.holder), with its epoch"
                    .to_string(),
                details: json!({ "field": "holder" }),
            }),
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

impl PadTools {
    async fn prime(&self, api: &dyn PadApi, ws: &str, holder: Option<&str>) -> Result<prime::Prime, ClientError> {
        let holder = holder.or(self.identity.as_ref().map(|i| i.holder.as_str()));
        let session_id = self.identity.as_ref().map(|i| i.session_id.as_str());
        prime::gather(api, prime::PrimeFor { workspace: ws, holder, session_id }).await
    }
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
        &self, _request: Option<PaginatedRequestParams>, _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompt = Prompt::new(
            PRIME_PROMPT,
            Some("Start a work session: your identity, leases, the ready work and how to take it (pad prime)"),
            None,
        );
        Ok(ListPromptsResult::with_all_items(vec![prompt]))
    }

    async fn get_prompt(
        &self, request: GetPromptRequestParams, ctx: RequestContext<RoleServer>,
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
