//! pad's HTTP API (SPEC §4): thin axum handlers over a [`Store`].
//!
//! Handlers parse (with the extractors in [`extract`]), authorize with
//! `pad_core::permits`, call the store, and map its error once
//! ([`error::ApiError`]). No domain logic lives here.

pub mod auth;
pub mod error;
pub mod extract;
pub mod openapi;
mod routes;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::routing::{delete, get, post};
use pad_core::api::ErrorCode;
use pad_store::{Actor, Store, StoreError};
use tower_http::trace::TraceLayer;

use crate::error::ApiError;

#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
}

/// What the first start on an empty store created (SPEC §6).
#[derive(Debug, Clone)]
pub struct Bootstrap {
    pub token: String,
    pub email: String,
    pub workspace: String,
}

pub const BOOTSTRAP_EMAIL: &str = "owner@localhost";
pub const DEFAULT_WORKSPACE: &str = "default";

/// Opens the store a `--database-url` names: `sqlite://PATH`, `sqlite:PATH`
/// or a bare path.
pub async fn open_store(database_url: &str) -> Result<Arc<dyn Store>, StoreError> {
    if database_url.starts_with("postgres://") || database_url.starts_with("postgresql://") {
        return Err(StoreError::invalid("database_url", "PostgreSQL is not supported by this build yet"));
    }
    Ok(Arc::new(pad_sqlite::SqliteStore::open_url(database_url).await?))
}

/// On a store with no users: creates workspace `default`, its owner and a
/// token, and returns the token (the only time it exists in clear).
pub async fn bootstrap(store: &dyn Store) -> Result<Option<Bootstrap>, StoreError> {
    if store.has_users().await? {
        return Ok(None);
    }
    let owner = Actor { user_id: store.ensure_user(BOOTSTRAP_EMAIL).await?.id };
    store.create_workspace(DEFAULT_WORKSPACE, "Default", owner).await?;
    let token = auth::new_token();
    store.create_token(owner, "bootstrap", &auth::hash_token(&token)).await?;
    Ok(Some(Bootstrap { token, email: BOOTSTRAP_EMAIL.into(), workspace: DEFAULT_WORKSPACE.into() }))
}

/// The whole HTTP surface.
pub fn app(store: Arc<dyn Store>) -> Router {
    use routes::{items, leases, workspaces as wss};
    let api = Router::new()
        .route("/me", get(wss::me))
        .route("/workspaces", get(wss::list).post(wss::create))
        .route("/workspaces/{ws}", get(wss::show))
        .route("/workspaces/{ws}/me", get(wss::me_in))
        .route("/workspaces/{ws}/kinds", get(wss::kinds).post(wss::add_kind))
        .route("/workspaces/{ws}/members", get(wss::members).post(wss::set_member))
        .route("/workspaces/{ws}/tokens", get(wss::tokens).post(wss::create_token))
        .route("/workspaces/{ws}/tokens/{id}", delete(wss::revoke_token))
        .route("/workspaces/{ws}/items", get(items::list).post(items::create))
        .route("/workspaces/{ws}/items/{ref}", get(items::show).patch(items::update).delete(items::delete))
        .route("/workspaces/{ws}/items/{ref}/restore", post(items::restore))
        .route("/workspaces/{ws}/items/{ref}/history", get(items::history))
        .route("/workspaces/{ws}/items/{ref}/comments", get(items::comments).post(items::comment))
        .route("/workspaces/{ws}/items/{ref}/claim", post(leases::claim))
        .route("/workspaces/{ws}/items/{ref}/renew", post(leases::renew))
        .route("/workspaces/{ws}/items/{ref}/release", post(leases::release));
    Router::new()
        .nest("/api/v1", api)
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(|| async { axum::Json(openapi::spec()) }))
        .fallback(|| async { ApiError::new(ErrorCode::NotFound, "no such route") })
        .method_not_allowed_fallback(|| async { ApiError::bad_request("method not allowed on this route", None) })
        .layer(DefaultBodyLimit::max(extract::BODY_LIMIT))
        .layer(TraceLayer::new_for_http())
        .with_state(AppState { store })
}

/// Ready when the store answers.
async fn readyz(State(s): State<AppState>) -> Result<&'static str, ApiError> {
    s.store.now().await?;
    s.store.has_users().await?;
    Ok("ready")
}

/// Serves until `shutdown` resolves, then finishes in-flight requests.
pub async fn serve(
    store: Arc<dyn Store>,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app(store)).with_graceful_shutdown(shutdown).await
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
