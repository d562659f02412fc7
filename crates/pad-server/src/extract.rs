//! Request extractors whose failures are answered in the API's envelope:
//! JSON bodies (docs/api.md, Limits), queries, path parameters (`path.rs`),
//! and the authenticated caller.

mod fields;
mod path;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header;
use axum::http::request::Parts;
use pad_core::api::{ErrorBody, ErrorCode};
use pad_core::{Action, Principal, Role, TokenScope, User, Workspace, authz, permits};
use pad_store::Actor;
use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;

use crate::AppState;
use crate::auth::hash_token;
use crate::error::ApiError;

/// The request body cap (docs/api.md, Limits).
pub const BODY_LIMIT: usize = 1024 * 1024;

/// A JSON body: `application/json` only, at most `LIMIT` bytes
/// ([`BODY_LIMIT`] unless a route says otherwise; the route's
/// `DefaultBodyLimit` layer must say the same), unknown fields refused with
/// the field named.
pub struct Json<T, const LIMIT: usize = BODY_LIMIT>(pub T);

impl<T: DeserializeOwned, S: Send + Sync, const LIMIT: usize> FromRequest<S> for Json<T, LIMIT> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let is_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
        if !is_json {
            return Err(ApiError::new(ErrorCode::UnsupportedMediaType, "request bodies must be application/json"));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(ErrorCode::PayloadTooLarge, format!("request bodies are limited to {} KiB", LIMIT / 1024))
            } else {
                ApiError::bad_request(format!("could not read the request body: {e}"), None)
            }
        })?;
        parse_json(&bytes).map(Json)
    }
}

/// Parses a body, naming the field on failure (`labels[2]`, `titel`). A body
/// is one JSON object and nothing after it: serde would otherwise read an
/// array positionally into a struct (`[null, null, true, "r"]` as a release
/// with `force`), and ignore whatever follows the object.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let first = bytes.iter().find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    if let Some(b) = first.filter(|b| **b != b'{') {
        let what = match b {
            b'[' => "an array",
            b'"' => "a string",
            b'-' | b'0'..=b'9' => "a number",
            b't' | b'f' => "a boolean",
            b'n' => "null",
            _ => "not JSON",
        };
        return Err(ApiError::bad_request(
            format!("request bodies must be a JSON object ({{\"field\": value, …}}); this one is {what}"),
            None,
        ));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut *de).map_err(|e| body_refusal(e, bytes))?;
    de.end().map_err(|e| {
        ApiError::bad_request(
            format!("invalid JSON body: the object must be the whole body, found more after it ({e})"),
            None,
        )
    })?;
    Ok(value)
}

/// Why a body could not be read, naming the field from the path serde
/// followed to it: an unknown field is the last step of that path.
fn body_refusal(e: serde_path_to_error::Error<serde_json::Error>, bytes: &[u8]) -> ApiError {
    let field = field_named(e.path());
    let given = serde_json::from_slice::<serde_json::Value>(bytes).ok();
    let given = given.as_ref().and_then(|body| value_at(body, e.path()));
    let last = e.path().iter().next_back().cloned();
    let inner = e.into_inner();
    // A number field given something that is not a whole number is refused
    // as its rule words it, from the value given (`ErrorBody::unreadable_number`:
    // a TTL's `invalid_ttl`, claim-next's `count` and `wait_seconds` as when
    // out of range; docs/api.md, "Batches and long polls"), wherever the
    // field is: inside an end's `next` (a claim-next body, refused as one,
    // docs/api.md, "The next item in the same call") or a renewal's
    // `leases[1]`, it is named there. A field the body does not have is
    // unknown whatever its name, and a body broken inside or after the
    // value is not JSON: `bad_request` below.
    // serde's own words are the only mark of an unknown field.
    let unknown = inner.to_string().starts_with("unknown field");
    if inner.is_data()
        && !unknown
        && let (Some(path), Some(given), Some(Segment::Map { key })) = (field.as_deref(), given, &last)
        && let Some(refusal) = ErrorBody::unreadable_number(key, given)
    {
        let refusal = ApiError::from(refusal);
        return match path.strip_suffix(key.as_str()).and_then(|p| p.strip_suffix('.')) {
            Some(parent) => refusal.within(parent),
            None => refusal,
        };
    }
    let message = match &field {
        Some(f) => format!("invalid JSON body at {f}: {inner}"),
        None => format!("invalid JSON body: {inner}"),
    };
    ApiError::bad_request(message, field.as_deref())
}

/// The value a deserializer's path leads to in `body`, when it is there.
fn value_at<'a>(body: &'a serde_json::Value, path: &serde_path_to_error::Path) -> Option<&'a serde_json::Value> {
    path.iter().try_fold(body, |v, segment| match segment {
        Segment::Seq { index } => v.get(index),
        Segment::Map { key } => v.get(key),
        Segment::Enum { .. } | Segment::Unknown => None,
    })
}

/// The field a deserializer's path leads to (`labels[2]`, `leases[1].ref`),
/// or `None` at the top (a missing or repeated field) or where serde could
/// not tell (the input ended before a key).
fn field_named(path: &serde_path_to_error::Path) -> Option<String> {
    let known = path.iter().all(|s| !matches!(s, Segment::Unknown));
    (known && path.iter().len() > 0).then(|| path.to_string())
}

/// A query string. An unknown parameter is `bad_request`; a parameter whose
/// value cannot be read (`?limit=abc`) is `validation_failed`; both name the
/// parameter in the message and in `details.field` (docs/api.md, Errors).
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parse_query(parts.uri.query().unwrap_or("")).map(Query)
    }
}

/// [`Query`]'s reading of `query`. A parameter is unknown when `T` declares
/// no field of its name.
pub fn parse_query<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(de).map_err(|e| {
        let inner = e.inner();
        let Some(field) = field_named(e.path()) else {
            return ApiError::bad_request(format!("invalid query: {inner}"), None);
        };
        if !fields::declared::<T>().contains(&field.as_str()) {
            return ApiError::bad_request(format!("invalid query: {inner}"), Some(&field));
        }
        ApiError::new(ErrorCode::ValidationFailed, format!("{field}: {inner}"))
            .with_details(serde_json::json!({ "field": field }))
    })
}

/// What a request authenticated with: a bearer token, or a web session
/// cookie; each by the hash of its secret. Kept so an event stream can check
/// it again while it stays open (docs/api.md, "Tokens").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Credential {
    Token(String),
    Session(String),
}

impl Credential {
    /// Who the credential stands for now; `None` once revoked or expired.
    pub async fn authenticate(&self, store: &dyn pad_store::Store) -> Result<Option<Principal>, ApiError> {
        Ok(match self {
            Credential::Token(hash) => store.authenticate(hash).await?,
            Credential::Session(hash) => store.authenticate_session(hash).await?,
        })
    }
}

/// The authenticated caller (`Authorization: Bearer …`, or the web session).
#[derive(Clone)]
pub struct Caller {
    pub user: User,
    /// The token's scope: `None` reaches all of the user's workspaces.
    pub scope: Option<TokenScope>,
    pub credential: Credential,
    /// The account at the root of the token's minting chain, when not the
    /// user itself: every per-account limit is charged to it too
    /// (docs/api.md, "Limits").
    pub charged_to: Option<i64>,
}

impl Caller {
    pub fn actor(&self) -> Actor {
        Actor { user_id: self.user.id }
    }

    /// The account this caller's limits are charged to: the root of its
    /// token's minting chain, which a token it mints inherits, so users an
    /// owner invents cannot shed the charge by minting their own tokens
    /// (docs/api.md, "Limits").
    pub fn charged_account(&self) -> Actor {
        Actor { user_id: self.charged_to.unwrap_or(self.user.id) }
    }

    /// Refuses a token scoped to one workspace on a route that reaches past
    /// it (creating a workspace).
    pub fn require_unscoped(&self) -> Result<(), ApiError> {
        match self.scope {
            None => Ok(()),
            Some(_) => Err(ApiError::forbidden("this token is scoped to one workspace; use an unscoped token")),
        }
    }

    /// The workspaces this request may see, with its effective role in each.
    pub async fn workspaces(&self, store: &dyn pad_store::Store) -> Result<Vec<(Workspace, Role)>, ApiError> {
        Ok(store
            .list_workspaces(self.actor())
            .await?
            .into_iter()
            .filter_map(|(ws, role)| authz::effective_role(self.scope, ws.id, role).map(|r| (ws, r)))
            .collect())
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let credential = match bearer(&parts.headers) {
            Some(t) => Credential::Token(hash_token(&t)),
            None => Credential::Session(hash_token(&session_id(parts)?.ok_or_else(|| {
                ApiError::new(ErrorCode::Unauthorized, "missing bearer token (Authorization: Bearer <token>)")
            })?)),
        };
        let found = state.auth_cache.principal(&credential, credential.authenticate(state.store.as_ref()));
        let Some(p) = found.await? else {
            return Err(match credential {
                Credential::Token(_) => ApiError::new(ErrorCode::Unauthorized, "the token is unknown or revoked"),
                Credential::Session(_) => {
                    ApiError::new(ErrorCode::Unauthorized, "the session has ended; sign in again")
                }
            });
        };
        // Per user, so more tokens buy no more requests; and a token whose
        // minting chain starts with another account also counts against
        // that account, so users an owner invents buy it no more either
        // (docs/api.md, "Limits").
        let too_fast = |wait: u64, whose: &str| ApiError {
            retry_after: Some(wait as i64),
            ..ApiError::new(ErrorCode::RateLimited, format!("too many requests for {whose}; slow down"))
        };
        state.rate.check(p.user.id).map_err(|w| too_fast(w, "this user"))?;
        if let Some(root) = p.charged_to {
            state.rate.check(root).map_err(|w| too_fast(w, "the account this token is charged to"))?;
        }
        Ok(Caller { user: p.user, scope: p.scope, credential, charged_to: p.charged_to })
    }
}

/// The token of `Authorization: Bearer <token>`; the scheme's case does not
/// matter (`bearer`, `BEARER`), as HTTP has it (docs/api.md, "Tokens").
pub fn bearer(headers: &axum::http::HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim_start();
    let (scheme, token) = value.split_once([' ', '\t'])?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_string())
}

/// The web UI's session id, from its HttpOnly cookie. Requests that may
/// change state must also echo the session's CSRF value (the `pad_csrf`
/// cookie) in a header; the value is derived from the session id
/// (`session::csrf_for`), which a cross-site page can neither read nor forge.
fn session_id(parts: &Parts) -> Result<Option<String>, ApiError> {
    let Some(id) = crate::session::cookie(&parts.headers, crate::session::SESSION_COOKIE) else { return Ok(None) };
    let safe = matches!(parts.method, axum::http::Method::GET | axum::http::Method::HEAD);
    if !safe && !crate::session::csrf_echoed(&parts.headers, &id) {
        return Err(crate::session::csrf_refused());
    }
    Ok(Some(id))
}

pub use path::{ItemPath, MemberEmail, TokenId, WebhookId};

/// A caller inside one workspace (`/workspaces/{ws}/…`), with its role
/// there; the route's other path parameters are extractors of their own
/// (`path.rs`). Non-members get `not_found`, so a token learns nothing about
/// workspaces it cannot reach.
pub struct Ctx {
    pub caller: Caller,
    pub ws: Workspace,
    pub role: Role,
}

impl Ctx {
    pub fn actor(&self) -> Actor {
        self.caller.actor()
    }

    /// Refuses with `forbidden` unless the caller's role permits `action`.
    pub fn require(&self, action: Action) -> Result<(), ApiError> {
        if permits(self.role, action) {
            Ok(())
        } else {
            let (needed, what) = authz::needs(action);
            let at_least = if needed == Role::Owner { "owner".to_string() } else { format!("{needed} or owner") };
            Err(ApiError::forbidden(format!(
                "your role in {} is {}; to {what} you need {at_least}, which an owner of the workspace can grant",
                self.ws.slug, self.role
            ))
            .with_details(serde_json::json!({ "role": self.role, "required_role": needed })))
        }
    }

    /// The holder label: the given one, or the caller's email (docs/leases.md).
    pub fn holder(&self, given: Option<String>) -> String {
        given.unwrap_or_else(|| self.caller.user.email.clone())
    }
}

impl FromRequestParts<AppState> for Ctx {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        let slug = path::workspace_slug(parts, state).await?;
        Ctx::resolve(state, caller, &slug).await
    }
}

impl Ctx {
    /// An authenticated caller in the workspace `slug`: what every
    /// workspace route starts from, whether its caller came by HTTP or by an
    /// MCP tool call (`mcp.rs`).
    pub async fn resolve(state: &AppState, caller: Caller, slug: &str) -> Result<Self, ApiError> {
        let membership = state.store.membership(caller.actor(), slug);
        let membership = state.auth_cache.membership(caller.user.id, slug, membership).await;
        let (ws, role) = scoped_role(caller.scope, slug, membership)?;
        Ok(Ctx { caller, ws, role })
    }
}

/// The workspace `slug` and the role a request acts with there:
/// min(token scope, membership). Not a member, or a token scoped elsewhere:
/// `not_found`, the same answer, so a token learns nothing beyond its reach.
pub async fn workspace_role(
    store: &dyn pad_store::Store, user: Actor, scope: Option<TokenScope>, slug: &str,
) -> Result<(Workspace, Role), ApiError> {
    scoped_role(scope, slug, store.membership(user, slug).await)
}

/// [`workspace_role`] from the answer of `Store::membership`.
fn scoped_role(
    scope: Option<TokenScope>, slug: &str, membership: pad_store::StoreResult<(Workspace, Role)>,
) -> Result<(Workspace, Role), ApiError> {
    // Quoted, so a slug with spaces reads as one name; a non-member learns
    // no more than that it is not theirs.
    let not_found =
        || ApiError::new(ErrorCode::NotFound, format!("no workspace {slug:?}, or you are not a member of it"));
    let (ws, membership) = membership.map_err(|e| match e {
        pad_store::StoreError::Validation(_) => not_found(),
        e => e.into(),
    })?;
    let role = authz::effective_role(scope, ws.id, membership).ok_or_else(not_found)?;
    Ok((ws, role))
}

/// Checks again that `credential` still reaches workspace `slug`, for a
/// stream that outlives its request: `Ok(false)` once the token is revoked,
/// the session ended, or the membership gone.
pub async fn still_reaches(
    store: &dyn pad_store::Store, credential: &Credential, slug: &str,
) -> Result<bool, ApiError> {
    let Some(p) = credential.authenticate(store).await? else { return Ok(false) };
    match workspace_role(store, Actor { user_id: p.user.id }, p.scope, slug).await {
        Ok((_, role)) => Ok(permits(role, Action::Read)),
        Err(e) if e.code == ErrorCode::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any bytes as a request body: an answer, never a panic; a refusal
        /// is `bad_request` with a message.
        #[test]
        fn body_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Err(e) = parse_json::<pad_core::NewItem>(&bytes) {
                prop_assert_eq!(e.code, ErrorCode::BadRequest);
                prop_assert!(!e.message.is_empty());
            }
        }

        #[test]
        fn json_shaped_bodies_name_the_bad_field(key in "[a-z_]{1,12}", value in "\\PC{0,20}") {
            let body = serde_json::json!({ "title": "ok", key.clone(): value }).to_string();
            match parse_json::<pad_core::NewItem>(body.as_bytes()) {
                Ok(_) => {}
                Err(e) => prop_assert!(e.details.get("field").is_some(), "{e:?}"),
            }
        }
    }
}
