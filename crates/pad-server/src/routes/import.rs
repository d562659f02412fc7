//! `POST /api/v1/workspaces/{ws}/import` (docs/api.md, "Import"): a whole
//! import, one request and one store transaction.

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use pad_core::Action;
use pad_core::api::{ErrorEnvelope, ImportRequest, ImportResult};
use pad_store::Deadline;

use crate::AppState;
use crate::error::ApiResult;
use crate::extract::{Ctx, Json};

/// The body cap of an import, larger than other requests' (docs/api.md,
/// "Limits"): a workspace's items arrive in one body.
pub const IMPORT_BODY_LIMIT: usize = 32 * 1024 * 1024;

/// Import items, with their links, statuses, comments and deletions, all or
/// nothing. A key this workspace imported before writes nothing and answers
/// that import's result (200, `replayed`).
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/import", tag = "items",
    params(("ws" = String, Path)), request_body = ImportRequest,
    responses((status = 201, body = ImportResult, description = "imported"),
        (status = 200, body = ImportResult, description = "this key was imported before: nothing written"),
        (status = "default", body = ErrorEnvelope)))]
pub async fn import(
    State(s): State<AppState>, ctx: Ctx, deadline: Option<Extension<Deadline>>,
    Json(req): Json<ImportRequest, IMPORT_BODY_LIMIT>,
) -> ApiResult<(StatusCode, axum::Json<ImportResult>)> {
    ctx.require(Action::Write)?;
    // Adding kinds is an owner's change, as at POST …/kinds.
    if !req.kinds.is_empty() {
        ctx.require(Action::Administer)?;
    }
    // The request's deadline (docs/api.md, "Limits"), set by the connection
    // loop; a router driven without it (in-process tools) gets one of its own.
    let deadline = deadline.map_or_else(|| Deadline::after(s.connections.request_timeout), |Extension(d)| d);
    let result = s.store.import(&ctx.ws, ctx.actor(), &req, &deadline).await?;
    if result.replayed {
        return Ok((StatusCode::OK, axum::Json(result)));
    }
    s.event_committed();
    Ok((StatusCode::CREATED, axum::Json(result)))
}
