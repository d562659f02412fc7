//! The lease protocol over HTTP (docs/leases.md, L1-L8).

use axum::Extension;
use axum::extract::State;
use pad_core::Action;
use pad_core::ItemRef;
use pad_core::Status;
use pad_core::api::TtlSeconds;
use pad_core::api::{
    Batch, ClaimBody, ClaimNextBody, ClaimNextResponse, ClaimResponse, CompleteBody, CompleteResponse, ErrorCode,
    ErrorEnvelope, FailBody, FailResponse, FrontierList, FrontierQuery, Grant, RENEW_LEASES_MAX, ReleaseBody,
    ReleaseResponse, RenewBody, RenewLeasesBody, RenewLeasesResponse, RenewResponse, RenewResult,
};
use pad_core::lease::LeaseHandle;
use pad_store::{ClaimRequest, CompleteRequest, Deadline, FailRequest, ReleaseRequest, RenewRequest};

use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Ctx, ItemPath, Json, Query};
use crate::metrics::LeaseCount;

/// A claim as the store takes it: the holder defaults to the caller's email.
fn claim_request(
    ctx: &Ctx, holder: Option<String>, session_id: Option<String>, ttl_seconds: Option<TtlSeconds>,
    note: Option<String>, refresh: Option<bool>, max_hold_seconds: Option<i64>,
) -> ClaimRequest {
    ClaimRequest {
        actor: ctx.actor(),
        holder: ctx.holder(holder),
        session_id,
        ttl_seconds: ttl_seconds.map(TtlSeconds::seconds),
        note,
        refresh: refresh.unwrap_or(true),
        max_hold_seconds,
    }
}

/// A renewal as the store takes it: the holder defaults to the caller's email.
fn renew_request(ctx: &Ctx, body: RenewBody) -> RenewRequest {
    RenewRequest {
        actor: ctx.actor(),
        holder: ctx.holder(body.holder),
        handle: LeaseHandle { epoch: body.epoch, lease_id: body.lease_id },
        ttl_seconds: body.ttl_seconds.map(TtlSeconds::seconds),
        note: body.note,
    }
}

/// Claim an item's lease (L1), or refresh our own (L3).
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/items/{ref}/claim", tag = "leases",
    params(("ws" = String, Path), ("ref" = String, Path)), request_body = ClaimBody,
    responses((status = 200, body = ClaimResponse), (status = 409, body = ErrorEnvelope, description = "lease_held: another worker's live lease; details name it, Retry-After says when it expires"), (status = "default", body = ErrorEnvelope)))]
pub async fn claim(
    State(s): State<AppState>, ctx: Ctx, ItemPath(r): ItemPath, Json(body): Json<ClaimBody>,
) -> ApiResult<axum::Json<ClaimResponse>> {
    ctx.require(Action::Lease)?;
    let req = claim_request(
        &ctx,
        body.holder,
        body.session_id,
        body.ttl_seconds,
        body.note,
        body.refresh,
        body.max_hold_seconds,
    );
    let started = std::time::Instant::now();
    let out = s.store.claim(&ctx.ws, &r, &req).await;
    s.metrics.claim_latency(&ctx.ws.slug, started.elapsed());
    let out = out.inspect_err(|e| s.metrics.refused(&ctx.ws.slug, e))?;
    if out.refreshed {
        s.metrics.count(&ctx.ws.slug, LeaseCount::Refresh);
    } else {
        s.metrics.count(&ctx.ws.slug, LeaseCount::Claim);
        s.event_committed();
    }
    Ok(axum::Json(ClaimResponse {
        item_ref: r.to_string(),
        lease: out.lease,
        refreshed: out.refreshed,
        previous_note: out.previous_note,
        previous_holder: out.previous_holder,
    }))
}

/// Extend a live lease whose epoch matches (L4).
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/items/{ref}/renew", tag = "leases",
    params(("ws" = String, Path), ("ref" = String, Path)), request_body = RenewBody,
    responses((status = 200, body = RenewResponse), (status = 409, body = ErrorEnvelope, description = "lease_lost: expired, released or re-granted"), (status = "default", body = ErrorEnvelope)))]
pub async fn renew(
    State(s): State<AppState>, ctx: Ctx, ItemPath(r): ItemPath, Json(body): Json<RenewBody>,
) -> ApiResult<axum::Json<RenewResponse>> {
    ctx.require(Action::Lease)?;
    let req = renew_request(&ctx, body);
    let lease = s.store.renew(&ctx.ws, &r, &req).await.inspect_err(|e| s.metrics.refused(&ctx.ws.slug, e))?;
    s.metrics.count(&ctx.ws.slug, LeaseCount::Renewal);
    Ok(axum::Json(RenewResponse { item_ref: r.to_string(), capped: lease.is_capped(), lease }))
}

/// Release our lease (L6), or break another's as an owner (L7).
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/items/{ref}/release", tag = "leases",
    params(("ws" = String, Path), ("ref" = String, Path)), request_body = ReleaseBody,
    responses((status = 200, body = ReleaseResponse), (status = 409, body = ErrorEnvelope), (status = "default", body = ErrorEnvelope)))]
pub async fn release(
    State(s): State<AppState>, ctx: Ctx, deadline: Option<Extension<Deadline>>, ItemPath(r): ItemPath,
    Json(body): Json<ReleaseBody>,
) -> ApiResult<axum::Json<ReleaseResponse>> {
    ctx.require(Action::Lease)?;
    if body.force {
        ctx.require(Action::BreakLease)?;
    }
    let next = NextClaim::of(&ctx, body.next)?;
    let req = ReleaseRequest {
        actor: ctx.actor(),
        holder: ctx.holder(body.holder),
        handle: LeaseHandle { epoch: body.epoch, lease_id: body.lease_id },
        force: body.force,
        reason: body.reason,
        succeeded: body.succeeded,
    };
    let (out, claimed) = end_then_claim(
        &s,
        &ctx,
        deadline,
        next,
        async || s.store.release(&ctx.ws, &r, &req).await,
        async |n| s.store.release_then_claim(&ctx.ws, &r, &req, n).await,
    )
    .await?;
    if out.released() {
        s.metrics.count(&ctx.ws.slug, LeaseCount::Release);
        s.event_committed();
    }
    if let Some(held) = out.held {
        s.metrics.held(&ctx.ws.slug, held);
    }
    let (next, next_error) = NextClaim::answer(&s, &ctx, claimed);
    Ok(axum::Json(ReleaseResponse {
        item_ref: r.to_string(),
        released: out.released(),
        reason: out.reason.as_str().to_string(),
        next,
        next_error,
    }))
}

/// Set the status (default `done`) and end our lease in one fenced step (L15).
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/items/{ref}/complete", tag = "leases",
    params(("ws" = String, Path), ("ref" = String, Path)), request_body = CompleteBody,
    responses((status = 200, body = CompleteResponse), (status = 409, body = ErrorEnvelope, description = "lease_lost: the lease named is not the live one (expired, released, re-granted, or another item's); lease_held: another worker's"), (status = "default", body = ErrorEnvelope)))]
pub async fn complete(
    State(s): State<AppState>, ctx: Ctx, deadline: Option<Extension<Deadline>>, ItemPath(r): ItemPath,
    Json(body): Json<CompleteBody>,
) -> ApiResult<axum::Json<CompleteResponse>> {
    // A status change is an item write as well as a lease end.
    ctx.require(Action::Write)?;
    ctx.require(Action::Lease)?;
    let next = NextClaim::of(&ctx, body.next)?;
    let req = CompleteRequest {
        actor: ctx.actor(),
        holder: ctx.holder(body.holder),
        handle: LeaseHandle { epoch: body.epoch, lease_id: body.lease_id },
        status: body.status.unwrap_or(Status::Done),
    };
    let (item, claimed) = end_then_claim(
        &s,
        &ctx,
        deadline,
        next,
        async || s.store.complete(&ctx.ws, &r, &req).await,
        async |n| s.store.complete_then_claim(&ctx.ws, &r, &req, n).await,
    )
    .await?;
    s.metrics.count(&ctx.ws.slug, LeaseCount::Completion);
    s.event_committed();
    held(&s, &ctx, item.last_lease.as_ref());
    let (next, next_error) = NextClaim::answer(&s, &ctx, claimed);
    Ok(axum::Json(CompleteResponse { item_ref: item.item_ref.to_string(), item, next, next_error }))
}

/// Report a failed attempt (L14): ends our lease, counts the failure, defers
/// the item's next hand-out, quarantines at the threshold.
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/items/{ref}/fail", tag = "leases",
    params(("ws" = String, Path), ("ref" = String, Path)), request_body = FailBody,
    responses((status = 200, body = FailResponse), (status = 409, body = ErrorEnvelope, description = "lease_lost: the lease named is not the live one; lease_held: another worker's"), (status = "default", body = ErrorEnvelope)))]
pub async fn fail(
    State(s): State<AppState>, ctx: Ctx, deadline: Option<Extension<Deadline>>, ItemPath(r): ItemPath,
    Json(body): Json<FailBody>,
) -> ApiResult<axum::Json<FailResponse>> {
    ctx.require(Action::Lease)?;
    let next = NextClaim::of(&ctx, body.next)?;
    let req = FailRequest {
        actor: ctx.actor(),
        holder: ctx.holder(body.holder),
        handle: LeaseHandle { epoch: body.epoch, lease_id: body.lease_id },
        note: body.note,
        max_failures: body.max_failures,
    };
    let (out, claimed) = end_then_claim(
        &s,
        &ctx,
        deadline,
        next,
        async || s.store.fail(&ctx.ws, &r, &req).await,
        async |n| s.store.fail_then_claim(&ctx.ws, &r, &req, n).await,
    )
    .await?;
    s.metrics.count(&ctx.ws.slug, LeaseCount::Failure);
    s.event_committed();
    if out.quarantined {
        s.metrics.count(&ctx.ws.slug, LeaseCount::Quarantine);
    }
    held(&s, &ctx, out.item.last_lease.as_ref());
    let (next, next_error) = NextClaim::answer(&s, &ctx, claimed);
    Ok(axum::Json(FailResponse {
        item_ref: out.item.item_ref.to_string(),
        item: out.item,
        quarantined: out.quarantined,
        next,
        next_error,
    }))
}

/// Put a quarantined item back in the queue (docs/leases.md, "Requeue"):
/// owners only, as an override of what the workers reported.
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/items/{ref}/requeue", tag = "leases",
    params(("ws" = String, Path), ("ref" = String, Path)),
    responses((status = 200, body = pad_core::Item), (status = 403, body = ErrorEnvelope, description = "forbidden: only owners requeue"), (status = "default", body = ErrorEnvelope)))]
pub async fn requeue(
    State(s): State<AppState>, ctx: Ctx, ItemPath(r): ItemPath,
) -> ApiResult<axum::Json<pad_core::Item>> {
    ctx.require(Action::BreakLease)?;
    let item = s.store.requeue(&ctx.ws, ctx.actor(), &r).await?;
    s.event_committed();
    Ok(axum::Json(item))
}

/// Feeds the hold-time histogram from the lease an end just recorded (L18).
fn held(s: &AppState, ctx: &Ctx, last: Option<&pad_core::lease::LastLease>) {
    if let Some(l) = last {
        s.metrics.held(&ctx.ws.slug, l.ended_at - l.acquired_at);
    }
}

/// Ready work (L11): open, unblocked, unleased; best first.
#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/frontier", tag = "leases",
    params(("ws" = String, Path), FrontierQuery),
    responses((status = 200, body = FrontierList), (status = "default", body = ErrorEnvelope)))]
pub async fn frontier(
    State(s): State<AppState>, ctx: Ctx, Query(q): Query<FrontierQuery>,
) -> ApiResult<axum::Json<FrontierList>> {
    ctx.require(Action::Read)?;
    let items = s.store.frontier(&ctx.ws, &q.filter(), q.limit.unwrap_or(pad_core::LIST_LIMIT_DEFAULT)).await?;
    Ok(axum::Json(FrontierList { items }))
}

/// Atomically claim the best ready items (L11), `count` of them at most,
/// each under its own lease; with `wait_seconds` (or `wait`), wait for one to become
/// ready (docs/api.md, "Batches and long polls"). `item: null` and no
/// grants when none is.
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/claim-next", tag = "leases",
    params(("ws" = String, Path)), request_body = ClaimNextBody,
    responses((status = 200, body = ClaimNextResponse), (status = "default", body = ErrorEnvelope)))]
pub async fn claim_next(
    State(s): State<AppState>, ctx: Ctx, Json(body): Json<ClaimNextBody>,
) -> ApiResult<axum::Json<ClaimNextResponse>> {
    ctx.require(Action::Lease)?;
    let batch = Batch::of(&body)?;
    let req =
        claim_request(&ctx, body.holder, body.session_id, body.ttl_seconds, body.note, None, body.max_hold_seconds);
    // Subscribed before the first look, so a change committed between the
    // look and the wait still wakes it; only by a call that may wait, so a
    // plain claim-next subscribes to nothing (and starts no listener).
    let mut wake = (!batch.wait.is_zero()).then(|| s.ready_signals());
    let deadline = tokio::time::Instant::now() + s.wait_bound(batch.wait);
    let answer = loop {
        let answer = grant(&s, &ctx, &body.filter, &req, batch.count).await?;
        if answer.item.is_some() {
            break answer;
        }
        let Some(wake) = wake.as_mut() else { break answer };
        let _waiting = s.metrics.waiting();
        if !wake.wait_until(deadline).await {
            break answer;
        }
    };
    missed(&s, &ctx, &answer);
    Ok(axum::Json(answer))
}

/// One look for ready items: claims up to `count` of them (L11), counts the
/// grants, and wakes this instance's streams for them. A call that found
/// nothing is counted once by its caller ([`missed`]), however many looks
/// it made.
async fn grant(
    s: &AppState, ctx: &Ctx, filter: &pad_core::FrontierFilter, req: &ClaimRequest, count: u32,
) -> ApiResult<ClaimNextResponse> {
    let started = std::time::Instant::now();
    let answer = s.store.claim_next_many(&ctx.ws, filter, req, count).await;
    granted(s, ctx, answer, started)
}

/// Claim-next's answer, as its metrics count it: `answer`, made from `started`.
fn granted(
    s: &AppState, ctx: &Ctx, answer: pad_store::ClaimedNext, started: std::time::Instant,
) -> ApiResult<ClaimNextResponse> {
    s.metrics.claim_latency(&ctx.ws.slug, started.elapsed());
    let grants = answer?;
    if !grants.is_empty() {
        for _ in &grants {
            s.metrics.count(&ctx.ws.slug, LeaseCount::ClaimNextHit);
            s.metrics.count(&ctx.ws.slug, LeaseCount::Claim);
        }
        s.event_committed();
    }
    let grants = grants
        .into_iter()
        .map(|(item, out)| Grant {
            item,
            lease: out.lease,
            previous_note: out.previous_note,
            previous_holder: out.previous_holder,
        })
        .collect();
    Ok(ClaimNextResponse::new(grants))
}

/// Counts a claim-next call that found nothing ready.
fn missed(s: &AppState, ctx: &Ctx, answer: &ClaimNextResponse) {
    if answer.item.is_none() {
        s.metrics.count(&ctx.ws.slug, LeaseCount::ClaimNextMiss);
    }
}

/// The claim-next a lease end carries in `next` (docs/api.md, "The next
/// item in the same call"), checked in full before the end is written, so
/// a bad one is refused with nothing changed: the same checks as
/// claim-next's, naming the field inside `next`, and no long poll.
struct NextClaim;

impl NextClaim {
    fn of(ctx: &Ctx, body: Option<ClaimNextBody>) -> ApiResult<Option<pad_store::NextClaim>> {
        let Some(body) = body else { return Ok(None) };
        let batch = Batch::of(&body).map_err(|e| ApiError::from(e).within("next"))?;
        if !batch.wait.is_zero() {
            let field = if body.wait_seconds.is_some() { "wait_seconds" } else { "wait" };
            let message = format!(
                "an end's next claim does not wait (got {}); wait for work with claim-next's {field}",
                body.wait_asked().unwrap_or_default()
            );
            return Err(ApiError::from(pad_core::ValidationError::new(field, message)).within("next"));
        }
        body.filter.validate().map_err(|e| ApiError::from(e).within("next"))?;
        let req =
            claim_request(ctx, body.holder, body.session_id, body.ttl_seconds, body.note, None, body.max_hold_seconds);
        req.validate(&ctx.ws.settings).map_err(|e| ApiError::from(e).within("next"))?;
        Ok(Some(pad_store::NextClaim { filter: body.filter, req, count: batch.count }))
    }

    /// The end's `next` and `next_error`, from the claim's answer if one
    /// was asked (the end stands either way: [`end_then_claim`]).
    fn answer(
        s: &AppState, ctx: &Ctx, claimed: Option<ApiResult<ClaimNextResponse>>,
    ) -> (Option<ClaimNextResponse>, Option<pad_core::api::ErrorBody>) {
        match claimed {
            None => (None, None),
            Some(Ok(answer)) => {
                missed(s, ctx, &answer);
                (Some(answer), None)
            }
            Some(Err(e)) => (None, Some(e.body())),
        }
    }
}

/// A lease end and the claim it carries (docs/api.md, "The next item in the
/// same call"): made together, the request's answer claimed first (from
/// then on it waits for the writes), so the end's answer is never lost to
/// the claim; when the request's time was already up, the end alone and the
/// claim not made. The end's refusal is counted and returned.
async fn end_then_claim<T>(
    s: &AppState, ctx: &Ctx, deadline: Option<Extension<Deadline>>, next: Option<pad_store::NextClaim>,
    end: impl AsyncFnOnce() -> pad_store::StoreResult<T>,
    with_next: impl AsyncFnOnce(&pad_store::NextClaim) -> pad_store::StoreResult<(T, pad_store::ClaimedNext)>,
) -> ApiResult<(T, Option<ApiResult<ClaimNextResponse>>)> {
    let refused = |e: &pad_store::StoreError| s.metrics.refused(&ctx.ws.slug, e);
    match next {
        Some(n) if claim_commit(deadline.as_ref()) => {
            let started = std::time::Instant::now();
            let (out, claimed) = with_next(&n).await.inspect_err(refused)?;
            Ok((out, Some(granted(s, ctx, claimed, started))))
        }
        next => {
            let out = end().await.inspect_err(refused)?;
            Ok((out, next.map(|_| Err(late()))))
        }
    }
}

/// Claims the request's commit: from now on its answer waits for the writes
/// (`pad_store::Deadline`); false when its time was already up.
fn claim_commit(deadline: Option<&Extension<Deadline>>) -> bool {
    deadline.is_none_or(|Extension(d)| d.claim_commit())
}

/// Why an end's next claim was not made: the request's time was up.
fn late() -> ApiError {
    ApiError::new(
        ErrorCode::Unavailable,
        "the end was recorded, but the request's time was up before the next item could be claimed; claim it with claim-next",
    )
}

/// One heartbeat for many leases (L4): each renewed or refused on its own,
/// answers in the order asked (docs/api.md, "Batches and long polls").
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/leases/renew", tag = "leases",
    params(("ws" = String, Path)), request_body = RenewLeasesBody,
    responses((status = 200, body = RenewLeasesResponse), (status = "default", body = ErrorEnvelope)))]
pub async fn renew_leases(
    State(s): State<AppState>, ctx: Ctx, Json(body): Json<RenewLeasesBody>,
) -> ApiResult<axum::Json<RenewLeasesResponse>> {
    ctx.require(Action::Lease)?;
    if body.leases.len() > RENEW_LEASES_MAX {
        return Err(ApiError::new(
            ErrorCode::ValidationFailed,
            format!("leases: at most {RENEW_LEASES_MAX} leases per call (got {})", body.leases.len()),
        )
        .with_details(serde_json::json!({ "field": "leases" })));
    }
    let mut renewals = Vec::with_capacity(body.leases.len());
    for (i, e) in body.leases.iter().enumerate() {
        let r = ItemRef::parse_field(&format!("leases[{i}].ref"), &e.item_ref)?;
        renewals.push((r, renew_request(&ctx, e.body())));
    }
    let answers = s.store.renew_many(&ctx.ws, &renewals).await;
    let results = renewals
        .iter()
        .zip(answers)
        .map(|((r, _), answer)| match answer {
            Ok(lease) => {
                s.metrics.count(&ctx.ws.slug, LeaseCount::Renewal);
                RenewResult { item_ref: r.to_string(), capped: lease.is_capped(), lease: Some(lease), error: None }
            }
            Err(e) => {
                s.metrics.refused(&ctx.ws.slug, &e);
                let error = ApiError::from(e).body();
                RenewResult { item_ref: r.to_string(), lease: None, capped: false, error: Some(error) }
            }
        })
        .collect();
    Ok(axum::Json(RenewLeasesResponse { results }))
}
