//! Typed path parameters, each parsed once, before the handler runs: a bad
//! `{ref}` is `validation_failed` naming `ref`, a bad `{id}` is
//! `bad_request` naming `id` (docs/api.md, "Errors").

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use pad_core::ItemRef;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// The route's parameters read into `T`; a parameter `T` does not name is
/// left for another extractor.
async fn params<T: DeserializeOwned + Send, S: Send + Sync>(parts: &mut Parts, state: &S) -> Result<T, ApiError> {
    let Path(p) = Path::<T>::from_request_parts(parts, state)
        .await
        .map_err(|e| ApiError::bad_request(format!("invalid path: {e}"), None))?;
    Ok(p)
}

/// `{ws}`: the workspace slug, which [`super::Ctx`] resolves.
#[derive(Deserialize)]
struct WsParam {
    ws: String,
}

/// The `{ws}` of a workspace route.
pub(super) async fn workspace_slug<S: Send + Sync>(parts: &mut Parts, state: &S) -> Result<String, ApiError> {
    Ok(params::<WsParam, S>(parts, state).await?.ws)
}

/// `{ref}`: an item ref, read case-insensitively (docs/api.md, "Items"), so
/// the store takes it typed.
pub struct ItemPath(pub ItemRef);

impl ItemPath {
    /// The ref as written in a path (or handed over by an MCP tool call).
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        Ok(ItemPath(ItemRef::parse_field("ref", text)?))
    }
}

#[derive(Deserialize)]
struct RefParam {
    #[serde(rename = "ref")]
    item_ref: String,
}

impl<S: Send + Sync> FromRequestParts<S> for ItemPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        ItemPath::parse(&params::<RefParam, S>(parts, state).await?.item_ref)
    }
}

#[derive(Deserialize)]
struct IdParam {
    id: String,
}

/// `{id}` as a number; `what` names the thing in the refusal.
async fn id<S: Send + Sync>(parts: &mut Parts, state: &S, what: &str) -> Result<i64, ApiError> {
    let text = params::<IdParam, S>(parts, state).await?.id;
    text.parse().map_err(|_| ApiError::bad_request(format!("{what} id must be a number"), Some("id")))
}

/// `{id}` of `…/tokens/{id}`.
pub struct TokenId(pub i64);

impl<S: Send + Sync> FromRequestParts<S> for TokenId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        id(parts, state, "token").await.map(TokenId)
    }
}

/// `{id}` of `…/webhooks/{id}`.
pub struct WebhookId(pub i64);

impl<S: Send + Sync> FromRequestParts<S> for WebhookId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        id(parts, state, "webhook").await.map(WebhookId)
    }
}

/// `{email}` of `…/members/{email}`; the store checks it is a member's.
pub struct MemberEmail(pub String);

#[derive(Deserialize)]
struct EmailParam {
    email: String,
}

impl<S: Send + Sync> FromRequestParts<S> for MemberEmail {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Ok(MemberEmail(params::<EmailParam, S>(parts, state).await?.email))
    }
}
