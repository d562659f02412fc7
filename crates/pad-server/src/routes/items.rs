//! Items, their history and comments (docs/api.md).

use axum::extract::State;
use axum::http::StatusCode;
use pad_core::api::{
    COMMENTS_LIMIT_DEFAULT, CommentList, DeleteQuery, ErrorEnvelope, HISTORY_LIMIT_DEFAULT, ItemPage, ListQuery,
    NewComment, PageQuery, VersionList,
};
use pad_core::{Action, Comment, Item, ItemPatch, LIST_LIMIT_DEFAULT, NewItem};

use crate::AppState;
use crate::error::ApiResult;
use crate::extract::{Ctx, ItemPath, Json, Query};

type JsonOut<T> = ApiResult<axum::Json<T>>;

/// List items, oldest first, with filters and cursor pagination.
#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/items", tag = "items",
    params(("ws" = String, Path), ListQuery),
    responses((status = 200, body = ItemPage), (status = "default", body = ErrorEnvelope)))]
pub async fn list(State(s): State<AppState>, ctx: Ctx, Query(q): Query<ListQuery>) -> JsonOut<ItemPage> {
    ctx.require(Action::Read)?;
    let filter = q.filter()?;
    let page = s.store.list_items(&ctx.ws, &filter, q.limit.unwrap_or(LIST_LIMIT_DEFAULT), q.cursor.as_deref()).await?;
    Ok(axum::Json(ItemPage { items: page.items, next_cursor: page.next_cursor }))
}

#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/items", tag = "items",
    params(("ws" = String, Path)), request_body = NewItem,
    responses((status = 201, body = Item), (status = "default", body = ErrorEnvelope)))]
pub async fn create(
    State(s): State<AppState>, ctx: Ctx, Json(new): Json<NewItem>,
) -> ApiResult<(StatusCode, axum::Json<Item>)> {
    ctx.require(Action::Write)?;
    let item = s.store.create_item(&ctx.ws, ctx.actor(), &new).await?;
    s.event_committed();
    Ok((StatusCode::CREATED, axum::Json(item)))
}

/// Show an item; `lease` is present only while a live lease exists.
#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/items/{ref}", tag = "items",
    params(("ws" = String, Path), ("ref" = String, Path)),
    responses((status = 200, body = Item), (status = "default", body = ErrorEnvelope)))]
pub async fn show(State(s): State<AppState>, ctx: Ctx, ItemPath(r): ItemPath) -> JsonOut<Item> {
    ctx.require(Action::Read)?;
    Ok(axum::Json(s.store.get_item(&ctx.ws, &r).await?))
}

/// Update content; `expected_updated_at` and `lease_epoch` guard the write.
#[utoipa::path(patch, path = "/api/v1/workspaces/{ws}/items/{ref}", tag = "items",
    params(("ws" = String, Path), ("ref" = String, Path)), request_body = ItemPatch,
    responses((status = 200, body = Item), (status = 409, body = ErrorEnvelope, description = "update_conflict or lease_lost"), (status = "default", body = ErrorEnvelope)))]
pub async fn update(
    State(s): State<AppState>, ctx: Ctx, ItemPath(r): ItemPath, Json(patch): Json<ItemPatch>,
) -> JsonOut<Item> {
    ctx.require(Action::Write)?;
    let item = s.store.update_item(&ctx.ws, ctx.actor(), &r, &patch).await?;
    s.event_committed();
    Ok(axum::Json(item))
}

/// Soft delete.
#[utoipa::path(delete, path = "/api/v1/workspaces/{ws}/items/{ref}", tag = "items",
    params(("ws" = String, Path), ("ref" = String, Path), DeleteQuery),
    responses((status = 200, body = Item), (status = "default", body = ErrorEnvelope)))]
pub async fn delete(
    State(s): State<AppState>, ctx: Ctx, ItemPath(r): ItemPath, Query(q): Query<DeleteQuery>,
) -> JsonOut<Item> {
    ctx.require(Action::Write)?;
    let fence = pad_core::lease::LeaseHandle { epoch: q.lease_epoch, lease_id: q.lease_id };
    let item = s.store.delete_item(&ctx.ws, ctx.actor(), &r, fence).await?;
    s.event_committed();
    Ok(axum::Json(item))
}

#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/items/{ref}/restore", tag = "items",
    params(("ws" = String, Path), ("ref" = String, Path)),
    responses((status = 200, body = Item), (status = "default", body = ErrorEnvelope)))]
pub async fn restore(State(s): State<AppState>, ctx: Ctx, ItemPath(r): ItemPath) -> JsonOut<Item> {
    ctx.require(Action::Write)?;
    let item = s.store.restore_item(&ctx.ws, ctx.actor(), &r).await?;
    s.event_committed();
    Ok(axum::Json(item))
}

/// History versions, newest first, one page at a time (docs/api.md,
/// "Pages of history and comments").
#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/items/{ref}/history", tag = "items",
    params(("ws" = String, Path), ("ref" = String, Path), PageQuery),
    responses((status = 200, body = VersionList), (status = "default", body = ErrorEnvelope)))]
pub async fn history(
    State(s): State<AppState>, ctx: Ctx, ItemPath(r): ItemPath, Query(q): Query<PageQuery>,
) -> JsonOut<VersionList> {
    ctx.require(Action::Read)?;
    let limit = q.limit.unwrap_or(HISTORY_LIMIT_DEFAULT);
    let page = s.store.history_page(&ctx.ws, &r, limit, q.cursor.as_deref()).await?;
    Ok(axum::Json(VersionList { versions: page.items, next_cursor: page.next_cursor }))
}

/// Comments, oldest first, one page at a time.
#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/items/{ref}/comments", tag = "items",
    params(("ws" = String, Path), ("ref" = String, Path), PageQuery),
    responses((status = 200, body = CommentList), (status = "default", body = ErrorEnvelope)))]
pub async fn comments(
    State(s): State<AppState>, ctx: Ctx, ItemPath(r): ItemPath, Query(q): Query<PageQuery>,
) -> JsonOut<CommentList> {
    ctx.require(Action::Read)?;
    let limit = q.limit.unwrap_or(COMMENTS_LIMIT_DEFAULT);
    let page = s.store.comments_page(&ctx.ws, &r, limit, q.cursor.as_deref()).await?;
    Ok(axum::Json(CommentList { comments: page.items, next_cursor: page.next_cursor }))
}

#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/items/{ref}/comments", tag = "items",
    params(("ws" = String, Path), ("ref" = String, Path)), request_body = NewComment,
    responses((status = 201, body = Comment), (status = "default", body = ErrorEnvelope)))]
pub async fn comment(
    State(s): State<AppState>, ctx: Ctx, ItemPath(r): ItemPath, Json(c): Json<NewComment>,
) -> ApiResult<(StatusCode, axum::Json<Comment>)> {
    ctx.require(Action::Write)?;
    let comment = s.store.add_comment(&ctx.ws, ctx.actor(), &r, &c.body).await?;
    s.event_committed();
    Ok((StatusCode::CREATED, axum::Json(comment)))
}
