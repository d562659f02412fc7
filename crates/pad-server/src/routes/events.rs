//! The event log (docs/api.md, Events): a page of events, and a Server-Sent Events
//! stream that resumes from `Last-Event-ID` without gaps or duplicates.
//!
//! Streams poll the store from their cursor, woken early when this instance
//! commits an event ([`AppState::event_committed`]) and at least every
//! [`POLL`] otherwise, so events written through
//! another instance on the same database arrive too. Correctness rests on the
//! store invariant that a workspace's event ids become visible in increasing
//! order.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::Stream;
use pad_core::api::{ErrorCode, EventPage};
use pad_core::{Action, Event};

use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Ctx, Query};
use crate::limits::StreamPermit;

/// Bounds how late another instance's events arrive (Postgres has no
/// in-process wake-up across instances).
pub const POLL: Duration = Duration::from_millis(250);
/// How often an open stream checks that its token (or web session) and the
/// membership still reach the workspace: revocation, removal and sign-out
/// end open streams within this on other instances (docs/api.md, "Tokens").
/// On the instance that made the change, streams check again before they
/// send anything more (`AuthCache::changes`).
pub const RECHECK: Duration = Duration::from_secs(2);
const PAGE: u32 = 500;

pub use pad_core::api::EventsQuery;

#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/events", tag = "events",
    params(("ws" = String, Path), EventsQuery),
    responses((status = 200, body = EventPage), (status = "default", body = pad_core::api::ErrorEnvelope)))]
pub async fn page(
    State(s): State<AppState>, ctx: Ctx, Query(q): Query<EventsQuery>,
) -> ApiResult<axum::Json<EventPage>> {
    ctx.require(Action::Read)?;
    let filter = q.filter()?;
    let events = s.store.events_where(&ctx.ws, q.after.unwrap_or(0), q.limit.unwrap_or(100).min(1000), &filter).await?;
    Ok(axum::Json(EventPage { events }))
}

/// SSE: `id:` is the event id, `event:` its type, `data:` the event JSON.
#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/events/stream", tag = "events",
    params(("ws" = String, Path), EventsQuery, ("Last-Event-ID" = Option<i64>, Header, description = "resume after this id")),
    responses((status = 200, content_type = "text/event-stream", description = "a stream of events"), (status = 429, body = pad_core::api::ErrorEnvelope, description = "too many open streams for this user"), (status = "default", body = pad_core::api::ErrorEnvelope)))]
pub async fn stream(
    State(s): State<AppState>, ctx: Ctx, headers: HeaderMap, Query(q): Query<EventsQuery>,
) -> ApiResult<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>> {
    ctx.require(Action::Read)?;
    // The page's filters, checked the same way (docs/api.md, Events).
    let filter = q.filter()?;
    let resume = match headers.get("last-event-id") {
        None => None,
        Some(v) => {
            Some(v.to_str().ok().and_then(|v| v.trim().parse::<i64>().ok()).filter(|id| *id >= 0).ok_or_else(|| {
                ApiError::bad_request("Last-Event-ID must be an event id (a whole number)", Some("Last-Event-ID"))
            })?)
        }
    };
    let cursor = resume.or(q.after).unwrap_or(0);
    // Counted for the user and for the account at the root of its token's
    // minting chain, if another (docs/api.md, "Limits").
    let permit = s.streams.open_charged(ctx.caller.user.id, ctx.caller.charged_to).ok_or_else(|| ApiError {
        retry_after: Some(5),
        ..ApiError::new(
            ErrorCode::RateLimited,
            "too many open event streams for this user or the account that minted its token; close one first",
        )
    })?;
    let state = Tail {
        store: s.store.clone(),
        ws: ctx.ws,
        cursor,
        filter,
        buffer: VecDeque::new(),
        wake: s.wakes.subscribe(),
        closing: s.closing.subscribe(),
        credential: ctx.caller.credential.clone(),
        next_check: tokio::time::Instant::now() + RECHECK,
        auth_changes: s.auth_cache.changes(),
        _permit: permit,
    };
    let stream = futures::stream::unfold(state, |mut t| async move {
        loop {
            // Checked before anything is sent, so a busy stream checks too;
            // at once after a change of authorization on this instance.
            let changed = t.auth_changes.has_changed().unwrap_or(false);
            if changed {
                t.auth_changes.borrow_and_update();
            }
            if changed || tokio::time::Instant::now() >= t.next_check {
                match crate::extract::still_reaches(t.store.as_ref(), &t.credential, &t.ws.slug).await {
                    Ok(true) => {}
                    // Revoked, signed out or removed: the stream ends here.
                    Ok(false) => return None,
                    Err(e) => tracing::warn!(error = %e.message, "event stream access check failed; retrying"),
                }
                t.next_check = tokio::time::Instant::now() + RECHECK;
            }
            if let Some(e) = t.buffer.pop_front() {
                t.cursor = e.id;
                let data = serde_json::to_string(&e).unwrap_or_default();
                return Some((Ok(SseEvent::default().id(e.id.to_string()).event(e.kind.as_str()).data(data)), t));
            }
            match t.store.events_where(&t.ws, t.cursor, PAGE, &t.filter).await {
                Ok(events) if !events.is_empty() => {
                    t.buffer.extend(events);
                    continue;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "event stream read failed; retrying"),
            }
            if *t.closing.borrow() {
                return None;
            }
            tokio::select! {
                _ = tokio::time::timeout(POLL, t.wake.recv()) => {}
                // `changed` marks the change seen: check now.
                _ = t.auth_changes.changed() => t.next_check = tokio::time::Instant::now(),
                // Shutdown ends the stream; clients resume from Last-Event-ID elsewhere.
                _ = t.closing.changed() => return None,
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// One stream's position: what it has sent, and what it has read but not sent.
struct Tail {
    store: Arc<dyn pad_store::Store>,
    ws: pad_core::Workspace,
    cursor: i64,
    /// `ref=` and `type=`, applied by the store's read as on the page.
    filter: pad_core::EventFilter,
    buffer: VecDeque<Event>,
    wake: tokio::sync::broadcast::Receiver<()>,
    closing: tokio::sync::watch::Receiver<bool>,
    credential: crate::extract::Credential,
    next_check: tokio::time::Instant,
    auth_changes: tokio::sync::watch::Receiver<u64>,
    _permit: StreamPermit,
}
