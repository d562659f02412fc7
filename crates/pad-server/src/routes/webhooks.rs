//! Webhook subscriptions (docs/webhooks.md). Owners only: a subscription
//! sends the workspace's events elsewhere, and its deliveries show where.

use axum::extract::State;
use axum::http::StatusCode;
use pad_core::Action;
use pad_core::api::ErrorEnvelope;
use pad_core::webhook::{
    CreateWebhook, DeliveriesQuery, DeliveryList, Payload, TEST_EVENT, Webhook, WebhookCreated, WebhookDelivery,
    WebhookList,
};

use crate::AppState;
use crate::error::ApiResult;
use crate::extract::{Ctx, Json, Query, WebhookId};
use crate::webhooks;

/// Subscribe a URL to this workspace's events. The signing secret is in
/// this answer and no other.
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/webhooks", tag = "webhooks", params(("ws" = String, Path)),
    request_body = CreateWebhook,
    responses((status = 201, body = WebhookCreated), (status = "default", body = ErrorEnvelope)))]
pub async fn create(
    State(s): State<AppState>, ctx: Ctx, Json(body): Json<CreateWebhook>,
) -> ApiResult<(StatusCode, axum::Json<WebhookCreated>)> {
    ctx.require(Action::Administer)?;
    let secret = webhooks::new_secret();
    let webhook = s.store.create_webhook(&ctx.ws, ctx.actor(), &body, &secret).await?;
    Ok((StatusCode::CREATED, axum::Json(WebhookCreated { secret, webhook })))
}

#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/webhooks", tag = "webhooks", params(("ws" = String, Path)),
    responses((status = 200, body = WebhookList), (status = "default", body = ErrorEnvelope)))]
pub async fn list(State(s): State<AppState>, ctx: Ctx) -> ApiResult<axum::Json<WebhookList>> {
    ctx.require(Action::Administer)?;
    Ok(axum::Json(WebhookList { webhooks: s.store.list_webhooks(&ctx.ws).await? }))
}

/// Unsubscribe; pending deliveries and the delivery log go with it.
#[utoipa::path(delete, path = "/api/v1/workspaces/{ws}/webhooks/{id}", tag = "webhooks",
    params(("ws" = String, Path), ("id" = i64, Path)),
    responses((status = 204, description = "removed"), (status = "default", body = ErrorEnvelope)))]
pub async fn delete(State(s): State<AppState>, ctx: Ctx, WebhookId(id): WebhookId) -> ApiResult<StatusCode> {
    ctx.require(Action::Administer)?;
    s.store.delete_webhook(&ctx.ws, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Send one `webhook.test` delivery now, signed like any other, and answer
/// how it went (it is logged too). Not retried.
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/webhooks/{id}/test", tag = "webhooks",
    params(("ws" = String, Path), ("id" = i64, Path)),
    responses((status = 200, body = WebhookDelivery), (status = "default", body = ErrorEnvelope)))]
pub async fn test(
    State(s): State<AppState>, ctx: Ctx, WebhookId(id): WebhookId,
) -> ApiResult<axum::Json<WebhookDelivery>> {
    ctx.require(Action::Administer)?;
    let target = s.store.webhook_target(&ctx.ws, id).await?;
    let data = serde_json::json!({ "webhook_id": target.id });
    let ping = Payload {
        id: 0,
        kind: TEST_EVENT,
        item_ref: None,
        actor: Some(&ctx.caller.user.email),
        at: s.store.now().await?,
        data: &data,
    };
    let result = webhooks::send(s.webhook_targets, &target.url, &target.secret, &ctx.ws.slug, &ping, 1).await;
    Ok(axum::Json(s.store.log_webhook_test(&ctx.ws, target.id, &result).await?))
}

/// Resume a paused subscription: its queued events are sent again, oldest
/// first (docs/webhooks.md, "Paused subscriptions"). Not paused: no change.
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/webhooks/{id}/resume", tag = "webhooks",
    params(("ws" = String, Path), ("id" = i64, Path)),
    responses((status = 200, body = Webhook), (status = "default", body = ErrorEnvelope)))]
pub async fn resume(State(s): State<AppState>, ctx: Ctx, WebhookId(id): WebhookId) -> ApiResult<axum::Json<Webhook>> {
    ctx.require(Action::Administer)?;
    // No event is written, so nothing is woken: the delivery loop's next
    // look (within a second) finds the queue due.
    Ok(axum::Json(s.store.resume_webhook(&ctx.ws, id).await?))
}

/// The delivery log: every attempt with its status code, newest first.
#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/webhooks/{id}/deliveries", tag = "webhooks",
    params(("ws" = String, Path), ("id" = i64, Path), DeliveriesQuery),
    responses((status = 200, body = DeliveryList), (status = "default", body = ErrorEnvelope)))]
pub async fn deliveries(
    State(s): State<AppState>, ctx: Ctx, WebhookId(id): WebhookId, Query(q): Query<DeliveriesQuery>,
) -> ApiResult<axum::Json<DeliveryList>> {
    ctx.require(Action::Administer)?;
    let deliveries = s.store.webhook_deliveries(&ctx.ws, id, q.limit.unwrap_or(50)).await?;
    Ok(axum::Json(DeliveryList { deliveries }))
}
