//! pad's HTTP API (docs/api.md): thin axum handlers over a [`Store`].
//!
//! Handlers parse (with the extractors in `extract.rs`), authorize with
//! `pad_core::permits`, call the store, and map its error once
//! ([`error::ApiError`]). No domain logic lives here.

pub mod auth;
pub mod auth_cache;
mod error;
mod extract;
pub mod limits;
mod listen;
mod mcp;
pub mod metrics;
pub mod openapi;
mod ready;
mod routes;
pub mod session;
mod web;
pub mod webhooks;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::routing::{delete, get, post};
use pad_core::api::ErrorCode;
pub use pad_store::StoreError;
use pad_store::{Actor, Store};
use tower_http::trace::TraceLayer;

use crate::error::ApiError;

#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub metrics: Arc<metrics::Metrics>,
    pub streams: limits::StreamLimiter,
    /// Pinged when a request through this instance (or its expiry observer)
    /// has committed an event, so event streams and the webhook loop need not
    /// wait for their next poll: see [`AppState::event_committed`].
    pub wakes: tokio::sync::broadcast::Sender<()>,
    pub rate: limits::RateLimiter,
    /// Workspaces and invited users per account and hour (docs/api.md, "Limits").
    pub accounts: limits::AccountLimiter,
    /// Sign-ins, sign-outs and `/metrics` scrapes, which name no user (docs/api.md, "Limits").
    pub anonymous: limits::AnonymousLimiter,
    /// Flips to true when shutdown begins, so event streams end and the
    /// server can drain.
    pub closing: tokio::sync::watch::Sender<bool>,
    /// The request deadline and the connection cap.
    pub connections: limits::ConnectionLimits,
    /// Who credentials are and members' roles, kept briefly (docs/operations.md,
    /// "Authentication cache").
    pub auth_cache: Arc<auth_cache::AuthCache>,
    /// Markdown rendering off the async workers (docs/api.md, "Markdown").
    pub render: Arc<routes::render::Renderer>,
    /// Where webhook deliveries may go (docs/webhooks.md, "Where deliveries go").
    pub webhook_targets: webhooks::Targets,
    /// `PAD_METRICS_TOKEN`: `/metrics` answers only requests bearing it, and
    /// none while it is unset (docs/operations.md, "Metrics").
    pub metrics_token: Option<Arc<str>>,
    /// How often a waiting claim-next looks again with no signal
    /// (docs/api.md, "Batches and long polls"); tests lengthen it so only
    /// signals can wake one.
    pub relook: std::time::Duration,
    /// Web session cookies carry `Secure`: set when `PAD_PUBLIC_URL` is
    /// `https` (docs/operations.md, "Public URL").
    pub secure_cookies: bool,
}

impl AppState {
    /// The state the environment asks for.
    ///
    /// # Panics
    /// On a setting the environment gives that cannot be read (see
    /// [`AppState::try_new`], which [`serve`] uses to refuse to start instead).
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self::try_new(store).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`AppState::new`], or why a setting in the environment cannot be read.
    pub fn try_new(store: Arc<dyn Store>) -> Result<Self, String> {
        Ok(AppState {
            store,
            metrics: Default::default(),
            streams: Default::default(),
            wakes: tokio::sync::broadcast::channel(16).0,
            rate: limits::RateLimiter::from_env(),
            accounts: limits::AccountLimiter::from_env(),
            anonymous: limits::AnonymousLimiter::from_env(),
            closing: tokio::sync::watch::channel(false).0,
            connections: limits::ConnectionLimits::from_env(),
            auth_cache: Arc::new(auth_cache::AuthCache::from_env()),
            render: Default::default(),
            webhook_targets: webhooks::Targets::from_env()?,
            metrics_token: std::env::var("PAD_METRICS_TOKEN")
                .ok()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .map(Into::into),
            relook: ready::RELOOK,
            secure_cookies: session::secure_cookies_from_env(),
        })
    }
}

impl AppState {
    /// Wakes the event streams and the webhook loop. Called by a handler once
    /// its store call has committed an event (docs/api.md, Events: which
    /// changes write one), never for a request that wrote none (a render
    /// preview, a sign-in, a claim-next that found nothing, a refresh), so
    /// those cost the open streams no read. A `PATCH` that changed nothing
    /// still wakes them (its answer cannot say), at the cost of one read; an
    /// expiry a release or claim-next recorded on the way is picked up by the
    /// streams' next poll.
    pub fn event_committed(&self) {
        let _ = self.wakes.send(());
    }
}

/// What the first start on an empty store created (docs/operations.md).
#[derive(Debug, Clone)]
pub struct Bootstrap {
    pub token: String,
    pub email: String,
    pub workspace: String,
}

pub const BOOTSTRAP_EMAIL: &str = "owner@localhost";
const DEFAULT_WORKSPACE: &str = "default";

/// On a store with no users: creates workspace `default`, its owner and a
/// token, in one store transaction, and returns the token (the only time it
/// exists in clear). A crash inside leaves the store empty, so the next start
/// bootstraps again (docs/reliability.md, "First start").
pub async fn bootstrap(store: &dyn Store) -> Result<Option<Bootstrap>, StoreError> {
    if store.has_users().await? {
        return Ok(None);
    }
    let token = auth::new_token();
    // False: another instance on the same database bootstrapped first.
    if !store.bootstrap(BOOTSTRAP_EMAIL, DEFAULT_WORKSPACE, "Default", &auth::hash_token(&token)).await? {
        return Ok(None);
    }
    Ok(Some(Bootstrap { token, email: BOOTSTRAP_EMAIL.into(), workspace: DEFAULT_WORKSPACE.into() }))
}

/// Offline recovery (`pad admin token`): a fresh unscoped token for the
/// existing user `email`, written straight to the store. Refuses unknown
/// users, so it never invents an account.
pub async fn recovery_token(store: &dyn Store, email: &str) -> Result<(String, pad_core::TokenInfo), StoreError> {
    let Some(user) = store.user_by_email(email).await? else {
        return Err(StoreError::not_found(format!("user {email} (no such user in this database)")));
    };
    let token = auth::new_token();
    let info = store.create_token(Actor { user_id: user.id }, "admin-recovery", &auth::hash_token(&token)).await?;
    Ok((token, info))
}

/// The whole HTTP surface.
fn app(state: AppState) -> Router {
    use routes::{events, items, leases, render, workspaces as wss};
    let api = Router::new()
        .route("/me", get(wss::me))
        .route("/session", post(session::create).delete(session::delete))
        .route("/workspaces", get(wss::list).post(wss::create))
        .route("/workspaces/{ws}", get(wss::show).patch(wss::update_settings))
        .route("/workspaces/{ws}/me", get(wss::me_in))
        .route("/workspaces/{ws}/kinds", get(wss::kinds).post(wss::add_kind))
        .route("/workspaces/{ws}/members", get(wss::members).post(wss::set_member))
        .route("/workspaces/{ws}/members/{email}", delete(wss::remove_member))
        .route("/workspaces/{ws}/tokens", get(wss::tokens).post(wss::create_token))
        .route("/workspaces/{ws}/tokens/{id}", delete(wss::revoke_token))
        .route("/workspaces/{ws}/items", get(items::list).post(items::create))
        .route(
            "/workspaces/{ws}/import",
            post(routes::import::import).layer(DefaultBodyLimit::max(routes::import::IMPORT_BODY_LIMIT)),
        )
        .route("/workspaces/{ws}/items/{ref}", get(items::show).patch(items::update).delete(items::delete))
        .route("/workspaces/{ws}/items/{ref}/restore", post(items::restore))
        .route("/workspaces/{ws}/items/{ref}/history", get(items::history))
        .route("/workspaces/{ws}/items/{ref}/comments", get(items::comments).post(items::comment))
        .route("/workspaces/{ws}/items/{ref}/body.html", get(render::body_html))
        .route("/workspaces/{ws}/render", post(render::render))
        .route("/workspaces/{ws}/items/{ref}/claim", post(leases::claim))
        .route("/workspaces/{ws}/items/{ref}/renew", post(leases::renew))
        .route("/workspaces/{ws}/items/{ref}/release", post(leases::release))
        .route("/workspaces/{ws}/items/{ref}/complete", post(leases::complete))
        .route("/workspaces/{ws}/items/{ref}/fail", post(leases::fail))
        .route("/workspaces/{ws}/items/{ref}/requeue", post(leases::requeue))
        .route("/workspaces/{ws}/frontier", get(leases::frontier))
        .route("/workspaces/{ws}/claim-next", post(leases::claim_next))
        .route("/workspaces/{ws}/leases/renew", post(leases::renew_leases))
        .route("/workspaces/{ws}/events", get(events::page))
        .route("/workspaces/{ws}/events/stream", get(events::stream))
        .route("/workspaces/{ws}/webhooks", get(routes::webhooks::list).post(routes::webhooks::create))
        .route("/workspaces/{ws}/webhooks/{id}", delete(routes::webhooks::delete))
        .route("/workspaces/{ws}/webhooks/{id}/test", post(routes::webhooks::test))
        .route("/workspaces/{ws}/webhooks/{id}/resume", post(routes::webhooks::resume))
        .route("/workspaces/{ws}/webhooks/{id}/deliveries", get(routes::webhooks::deliveries));
    // The MCP service reads its body itself, so the body cap is a layer here.
    let mcp = Router::new()
        .nest_service("/mcp", pad_mcp::http_service())
        .layer(axum::middleware::from_fn_with_state(state.clone(), mcp::authenticated))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(extract::BODY_LIMIT));
    Router::new()
        .merge(mcp)
        .nest("/api/v1", api)
        .merge(web::routes())
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(|| async { axum::Json(openapi::spec()) }))
        .route("/metrics", get(metrics_text))
        .fallback(|| async { ApiError::new(ErrorCode::NotFound, "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(ErrorCode::MethodNotAllowed, "this route does not take that method")
        })
        .layer(DefaultBodyLimit::max(extract::BODY_LIMIT))
        .layer(axum::middleware::from_fn_with_state(state.clone(), time_request))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Times each request into the request-latency histogram.
async fn time_request(
    State(s): State<AppState>, req: axum::extract::Request, next: axum::middleware::Next,
) -> axum::response::Response {
    let started = std::time::Instant::now();
    let resp = next.run(req).await;
    s.metrics.observe_request(started.elapsed());
    resp
}

/// Ready when the store answers.
async fn readyz(State(s): State<AppState>) -> Result<&'static str, ApiError> {
    s.store.now().await?;
    s.store.has_users().await?;
    Ok("ready")
}

/// How often each instance looks for expired leases to record (L5, L13).
/// It only records what has already happened: leases expire on their own.
const EXPIRY_OBSERVER_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);

/// Serves until `shutdown` resolves, then finishes in-flight requests.
pub async fn serve(
    store: Arc<dyn Store>, listener: tokio::net::TcpListener, shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // A setting that cannot be read stops the start, with its reason.
    let state = AppState::try_new(store).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    serve_state(state, listener, shutdown).await
}

/// [`serve`] with a prepared state (e.g. other limits).
pub async fn serve_state(
    state: AppState, listener: tokio::net::TcpListener, shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let observer = tokio::spawn(observe_expiries(state.clone()));
    let deliverer = tokio::spawn(webhooks::deliver_loop(state.clone()));
    let closing = state.closing.clone();
    let shutdown = async move {
        shutdown.await;
        let _ = closing.send(true);
    };
    let connections = state.connections.clone();
    let result = listen::serve_connections(listener, app(state), connections, shutdown).await;
    observer.abort();
    deliverer.abort();
    result
}

/// `/metrics`: the live-lease gauge is read from the store at scrape time, so
/// every instance reports the same figure. The series name every workspace, so
/// a scrape needs `PAD_METRICS_TOKEN` and nothing is served while that is unset
/// (docs/operations.md, "Metrics").
async fn metrics_text(
    State(s): State<AppState>, client: listen::ClientIp, headers: axum::http::HeaderMap,
) -> Result<String, ApiError> {
    s.anonymous.check(limits::Anonymous::Metrics, client.0).map_err(ApiError::too_fast)?;
    let Some(expected) = &s.metrics_token else {
        return Err(ApiError::new(
            ErrorCode::Unauthorized,
            "/metrics is off until the server sets PAD_METRICS_TOKEN; \
             then scrape with Authorization: Bearer <PAD_METRICS_TOKEN>",
        ));
    };
    // Compared as hashes, so the comparison takes the same time wherever they differ.
    let given = extract::bearer(&headers).map(|t| auth::hash_token(&t));
    if given.as_deref() != Some(auth::hash_token(expected).as_str()) {
        return Err(ApiError::new(
            ErrorCode::Unauthorized,
            "/metrics needs the metrics token: scrape with Authorization: Bearer <PAD_METRICS_TOKEN>",
        ));
    }
    let live = s.store.live_leases().await.inspect_err(|e| tracing::warn!(error = %e, "could not count live leases"));
    Ok(s.metrics.render(live.ok().as_deref()) + &s.auth_cache.render())
}

async fn observe_expiries(s: AppState) {
    let mut tick = tokio::time::interval(EXPIRY_OBSERVER_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match s.store.observe_expiries().await {
            Ok(observed) if observed.is_empty() => {}
            Ok(observed) => {
                for e in &observed {
                    s.metrics.count(&e.workspace, metrics::LeaseCount::Expiry);
                    if e.quarantined {
                        s.metrics.count(&e.workspace, metrics::LeaseCount::Quarantine);
                    }
                    s.metrics.held(&e.workspace, e.held);
                }
                s.event_committed();
            }
            Err(e) => tracing::warn!(error = %e, "could not record expired leases"),
        }
    }
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}
