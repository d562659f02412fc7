//! Web sessions: `POST /api/v1/session` trades a token for a server-side
//! session: a random id in an HttpOnly, SameSite=Strict cookie, stored only
//! as its hash, ending after [`SESSION_TTL_SECONDS`] or on sign-out, plus a
//! readable CSRF cookie the page echoes in `X-CSRF-Token` on writes. The
//! token itself is never in a cookie (docs/api.md, "Web sessions").

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pad_core::api::ErrorCode;
use serde::Deserialize;

use crate::AppState;
use crate::auth::{hash_token, new_token};
use crate::error::{ApiError, ApiResult};
use crate::extract::Json;

pub const SESSION_COOKIE: &str = "pad_session";
pub const CSRF_COOKIE: &str = "pad_csrf";
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long a web session lasts; the server ends it then, whatever the cookie says.
pub const SESSION_TTL_SECONDS: u32 = 7 * 24 * 3600;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSession {
    pub token: String,
}

/// The value of cookie `name`, if the request carries it.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
        .filter(|v| !v.is_empty())
}

/// Whether the cookies carry `Secure`: when the server's public URL
/// (`PAD_PUBLIC_URL`) is `https`, so a browser never sends the session over
/// plain HTTP (docs/operations.md, "Public URL"). A local `http` server
/// keeps them without it, or no browser would send them back at all.
pub fn secure_cookies_from_env() -> bool {
    std::env::var("PAD_PUBLIC_URL").is_ok_and(|u| is_https(&u))
}

fn is_https(url: &str) -> bool {
    url.trim().get(..8).is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
}

fn set_cookies(resp: &mut Response, session: &str, csrf: &str, max_age: u32, secure: bool) {
    let h = resp.headers_mut();
    let secure = if secure { "; Secure" } else { "" };
    let session = format!("{SESSION_COOKIE}={session}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}");
    let csrf = format!("{CSRF_COOKIE}={csrf}; Path=/; SameSite=Strict; Max-Age={max_age}{secure}");
    for c in [session, csrf] {
        if let Ok(v) = HeaderValue::from_str(&c) {
            h.append(header::SET_COOKIE, v);
        }
    }
}

/// The CSRF value of session `id`: HMAC-SHA256 of the id, hex. Bound to the
/// session, so a value the caller made up (`pad_csrf=evil` with
/// `X-CSRF-Token: evil`) is refused. The secret is the session id itself,
/// which only the HttpOnly cookie carries; the HMAC key separates this use
/// of it, and being fixed, lets every instance behind a load balancer check
/// every session (docs/api.md, "Web sessions").
pub fn csrf_for(id: &str) -> String {
    use hmac::{KeyInit, Mac};
    let mut mac =
        hmac::Hmac::<sha2::Sha256>::new_from_slice(b"pad web session CSRF v1").expect("HMAC takes any key length");
    mac.update(id.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// Whether the request echoes its session's CSRF value in `X-CSRF-Token`
/// (compared as hashes, so the time taken says nothing about a guess).
pub fn csrf_echoed(headers: &HeaderMap, id: &str) -> bool {
    let given = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
    hash_token(given) == hash_token(&csrf_for(id))
}

/// The refusal of a cookie-authenticated write without the CSRF echo.
pub fn csrf_refused() -> ApiError {
    ApiError::forbidden("missing or wrong CSRF token (send the pad_csrf cookie's value as X-CSRF-Token)")
}

/// A new session id: 32 random bytes, like a token, with its own prefix.
fn new_session_id() -> String {
    format!("pads_{}", &new_token()[crate::auth::TOKEN_PREFIX.len()..])
}

/// Sign in: checks the token, opens a session for it, sets the cookies.
#[utoipa::path(post, path = "/api/v1/session", tag = "auth", request_body = NewSession, security(()),
    responses((status = 204, description = "signed in; cookies set"), (status = "default", body = pad_core::api::ErrorEnvelope)))]
pub async fn create(
    State(s): State<AppState>, client: crate::listen::ClientIp, Json(body): Json<NewSession>,
) -> ApiResult<Response> {
    s.anonymous.check(crate::limits::Anonymous::SignIn, client.0).map_err(ApiError::too_fast)?;
    let token = body.token.trim();
    let Some(principal) = s.store.authenticate(&hash_token(token)).await? else {
        return Err(ApiError::new(ErrorCode::Unauthorized, "the token is unknown or revoked"));
    };
    let id = new_session_id();
    s.store.create_session(principal.token_id, &hash_token(&id), SESSION_TTL_SECONDS.into()).await?;
    let mut resp = StatusCode::NO_CONTENT.into_response();
    set_cookies(&mut resp, &id, &csrf_for(&id), SESSION_TTL_SECONDS, s.secure_cookies);
    Ok(resp)
}

/// Sign out: ends the session on the server and clears the cookies. Like
/// any cookie-authenticated write, it needs the CSRF echo, so another site
/// cannot sign a user out. Anyone can send one with a made-up cookie (its
/// CSRF value derives from it), so it draws on the anonymous limiter and
/// wakes the open event streams only when it ended a session
/// (docs/api.md, "Web sessions").
#[utoipa::path(delete, path = "/api/v1/session", tag = "auth", security(()),
    responses((status = 204, description = "signed out"), (status = "default", body = pad_core::api::ErrorEnvelope)))]
pub async fn delete(
    State(s): State<AppState>, client: crate::listen::ClientIp, headers: HeaderMap,
) -> ApiResult<Response> {
    s.anonymous.check(crate::limits::Anonymous::SignOut, client.0).map_err(ApiError::too_fast)?;
    if let Some(id) = cookie(&headers, SESSION_COOKIE) {
        if !csrf_echoed(&headers, &id) {
            return Err(csrf_refused());
        }
        let hash = hash_token(&id);
        // Made before the store call, so a request cut short while it runs
        // still announces the change it may have committed.
        let fresh = s.auth_cache.forgetting(crate::extract::Credential::Session(hash.clone()));
        if !s.store.revoke_session(&hash).await? {
            fresh.unchanged();
        }
    }
    let mut resp = StatusCode::NO_CONTENT.into_response();
    set_cookies(&mut resp, "", "", 0, s.secure_cookies);
    Ok(resp)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_an_https_public_url_makes_cookies_secure() {
        assert!(super::is_https("https://pad.example.com"));
        assert!(super::is_https(" HTTPS://pad.example.com/ "));
        assert!(!super::is_https("http://pad.example.com"));
        assert!(!super::is_https("pad.example.com"));
        assert!(!super::is_https(""));
    }
}
