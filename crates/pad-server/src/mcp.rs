//! `POST /mcp`: the MCP tools (pad-mcp) run in this process, as the caller
//! this request authenticated. The request is authenticated and counted
//! against the caller's rate once, by [`authenticated`]; each tool call then
//! runs the same route handler its HTTP route runs, with that caller, so a
//! tool answers exactly as the API would: same authorization, same metrics,
//! same error envelope (docs/agents.md).

use std::sync::Arc;

use async_trait::async_trait;
use axum::Extension;
use axum::extract::{FromRequestParts, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use pad_client::ClientError;
use pad_core::api::{
    ClaimBody, ClaimNextBody, ClaimNextResponse, ClaimResponse, CompleteBody, CompleteResponse, FailBody, FailResponse,
    FrontierList, FrontierQuery, ItemPage, ListQuery, Me, NewComment, ReleaseBody, ReleaseResponse, RenewBody,
    RenewLeasesBody, RenewLeasesResponse, RenewResponse,
};
use pad_core::{Comment, Item, ItemPatch, NewItem};
use pad_mcp::{CallerApi, PadApi};
use pad_store::Deadline;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Ctx, ItemPath, Json, Query};
use crate::routes::{items, leases, workspaces};
use pad_core::api::ErrorCode;

/// Authenticates the request (401 without a valid credential, 429 past the
/// caller's rate, like any API route) and attaches the caller's in-process
/// API for the tools to use.
pub async fn authenticated(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let caller = match Caller::from_request_parts(&mut parts, &s).await {
        Ok(caller) => caller,
        Err(e) => return e.into_response(),
    };
    // Where the agent reached this pad, for its session brief.
    let host = parts.headers.get(axum::http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost");
    let server = format!("http://{host}/");
    let json_body = parts
        .headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
    // The request's deadline, for the tools that honour it as their routes do
    // (an end's `next`: docs/api.md, "The next item in the same call").
    let deadline = parts.extensions.get::<Deadline>().cloned();
    parts.extensions.insert(CallerApi(Arc::new(InProcess { state: s, caller, server, deadline })));
    enveloped(next.run(Request::from_parts(parts, body)).await, json_body).await
}

/// The MCP transport answers a request it cannot take (a wrong `Accept`,
/// a body that is not JSON-RPC) in plain text; pad's clients expect the
/// error envelope of every other route (docs/api.md, "Errors"): the
/// transport's sentence becomes its message, the status picks the code.
/// The transport answers 415 for any body it cannot read; when the request
/// did say `application/json` (`json_body`), the body is what is wrong, so
/// that is `400 bad_request`, as a malformed body is on every other route.
async fn enveloped(resp: Response, json_body: bool) -> Response {
    let status = resp.status();
    let malformed = json_body && status == axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE;
    let is_json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let code = match status.as_u16() {
        401 => ErrorCode::Unauthorized,
        403 => ErrorCode::Forbidden,
        404 => ErrorCode::NotFound,
        405 => ErrorCode::MethodNotAllowed,
        413 => ErrorCode::PayloadTooLarge,
        415 => ErrorCode::UnsupportedMediaType,
        429 => ErrorCode::RateLimited,
        s if s >= 500 => ErrorCode::InternalError,
        _ => ErrorCode::BadRequest,
    };
    // The transport's own sentence, bounded: it is a line, not a document.
    let text = axum::body::to_bytes(resp.into_body(), 4096).await.unwrap_or_default();
    let said = String::from_utf8_lossy(&text).trim().to_string();
    if malformed {
        let why = said.strip_prefix("fail to deserialize request body").unwrap_or(&said).trim();
        let message = format!("invalid JSON-RPC body: {}", if why.is_empty() { "not a JSON-RPC message" } else { why });
        return ApiError::bad_request(message, None).into_response();
    }
    let message = if said.is_empty() { format!("the MCP transport refused the request ({status})") } else { said };
    let mut out = ApiError::new(code, message).into_response();
    // Keep the transport's status (e.g. 406), which the code's own may not be.
    *out.status_mut() = status;
    out
}

/// The API as one authenticated caller sees it, without a network hop.
struct InProcess {
    state: AppState,
    caller: Caller,
    server: String,
    deadline: Option<Deadline>,
}

impl InProcess {
    /// The caller inside workspace `ws`, as a workspace route's extractor
    /// would make it.
    async fn ctx(&self, ws: &str) -> Result<Ctx, ClientError> {
        Ctx::resolve(&self.state, self.caller.clone(), ws).await.map_err(refusal)
    }

    /// The caller inside workspace `ws` and the item `item_ref`, parsed as
    /// the route's extractors would, in their order.
    async fn item_ctx(&self, ws: &str, item_ref: &str) -> Result<(Ctx, ItemPath), ClientError> {
        let ctx = self.ctx(ws).await?;
        Ok((ctx, ItemPath::parse(item_ref).map_err(refusal)?))
    }

    fn state(&self) -> State<AppState> {
        State(self.state.clone())
    }

    fn deadline(&self) -> Option<Extension<Deadline>> {
        self.deadline.clone().map(Extension)
    }
}

/// A handler's answer as a tool sees it.
fn answer<T>(out: Result<axum::Json<T>, ApiError>) -> Result<T, ClientError> {
    out.map(|axum::Json(v)| v).map_err(refusal)
}

/// The API's refusal as the HTTP client would have read it from the envelope.
fn refusal(e: ApiError) -> ClientError {
    ClientError::Api {
        status: e.code.http_status(),
        code: e.code,
        message: e.message,
        details: e.details,
        retry_after: e.retry_after.and_then(|s| u64::try_from(s).ok()),
    }
}

#[async_trait]
impl PadApi for InProcess {
    fn server(&self) -> String {
        self.server.clone()
    }

    async fn me(&self) -> Result<Me, ClientError> {
        answer(workspaces::me(self.state(), self.caller.clone()).await)
    }

    async fn list_items(&self, ws: &str, query: &ListQuery) -> Result<ItemPage, ClientError> {
        answer(items::list(self.state(), self.ctx(ws).await?, Query(query.clone())).await)
    }

    async fn item(&self, ws: &str, item_ref: &str) -> Result<Item, ClientError> {
        let (ctx, r) = self.item_ctx(ws, item_ref).await?;
        answer(items::show(self.state(), ctx, r).await)
    }

    async fn create_item(&self, ws: &str, new: &NewItem) -> Result<Item, ClientError> {
        let out = items::create(self.state(), self.ctx(ws).await?, Json(new.clone())).await;
        answer(out.map(|(_, item)| item))
    }

    async fn update_item(&self, ws: &str, item_ref: &str, patch: &ItemPatch) -> Result<Item, ClientError> {
        let (ctx, r) = self.item_ctx(ws, item_ref).await?;
        answer(items::update(self.state(), ctx, r, Json(patch.clone())).await)
    }

    async fn add_comment(&self, ws: &str, item_ref: &str, body: &NewComment) -> Result<Comment, ClientError> {
        let (ctx, r) = self.item_ctx(ws, item_ref).await?;
        let out = items::comment(self.state(), ctx, r, Json(body.clone())).await;
        answer(out.map(|(_, comment)| comment))
    }

    async fn frontier(&self, ws: &str, query: &FrontierQuery) -> Result<FrontierList, ClientError> {
        answer(leases::frontier(self.state(), self.ctx(ws).await?, Query(query.clone())).await)
    }

    async fn claim(&self, ws: &str, item_ref: &str, body: &ClaimBody) -> Result<ClaimResponse, ClientError> {
        let (ctx, r) = self.item_ctx(ws, item_ref).await?;
        answer(leases::claim(self.state(), ctx, r, Json(body.clone())).await)
    }

    async fn renew(&self, ws: &str, item_ref: &str, body: &RenewBody) -> Result<RenewResponse, ClientError> {
        let (ctx, r) = self.item_ctx(ws, item_ref).await?;
        answer(leases::renew(self.state(), ctx, r, Json(body.clone())).await)
    }

    async fn release(&self, ws: &str, item_ref: &str, body: &ReleaseBody) -> Result<ReleaseResponse, ClientError> {
        let (ctx, r) = self.item_ctx(ws, item_ref).await?;
        answer(leases::release(self.state(), ctx, self.deadline(), r, Json(body.clone())).await)
    }

    async fn complete(&self, ws: &str, item_ref: &str, body: &CompleteBody) -> Result<CompleteResponse, ClientError> {
        let (ctx, r) = self.item_ctx(ws, item_ref).await?;
        answer(leases::complete(self.state(), ctx, self.deadline(), r, Json(body.clone())).await)
    }

    async fn fail(&self, ws: &str, item_ref: &str, body: &FailBody) -> Result<FailResponse, ClientError> {
        let (ctx, r) = self.item_ctx(ws, item_ref).await?;
        answer(leases::fail(self.state(), ctx, self.deadline(), r, Json(body.clone())).await)
    }

    async fn claim_next(&self, ws: &str, body: &ClaimNextBody) -> Result<ClaimNextResponse, ClientError> {
        answer(leases::claim_next(self.state(), self.ctx(ws).await?, Json(body.clone())).await)
    }

    async fn renew_leases(&self, ws: &str, body: &RenewLeasesBody) -> Result<RenewLeasesResponse, ClientError> {
        answer(leases::renew_leases(self.state(), self.ctx(ws).await?, Json(body.clone())).await)
    }
}
