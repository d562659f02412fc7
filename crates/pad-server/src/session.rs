//! Web sessions: `POST /api/v1/session` trades a token for an HttpOnly,
//! SameSite=Strict cookie, plus a readable CSRF cookie the page echoes in
//! `X-CSRF-Token` on writes. The token itself never reaches page scripts.

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
const MAX_AGE: u32 = 30 * 24 * 3600;

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

fn set_cookies(resp: &mut Response, session: &str, csrf: &str, max_age: u32) {
    let h = resp.headers_mut();
    let session = format!("{SESSION_COOKIE}={session}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}");
    let csrf = format!("{CSRF_COOKIE}={csrf}; Path=/; SameSite=Strict; Max-Age={max_age}");
    for c in [session, csrf] {
        if let Ok(v) = HeaderValue::from_str(&c) {
            h.append(header::SET_COOKIE, v);
        }
    }
}

/// Sign in: checks the token, then sets the session cookies.
#[utoipa::path(post, path = "/api/v1/session", tag = "auth", request_body = NewSession, security(()),
    responses((status = 204, description = "signed in; cookies set"), (status = "default", body = pad_core::api::ErrorEnvelope)))]
pub async fn create(State(s): State<AppState>, Json(body): Json<NewSession>) -> ApiResult<Response> {
    let token = body.token.trim();
    if s.store.authenticate(&hash_token(token)).await?.is_none() {
        return Err(ApiError::new(ErrorCode::Unauthorized, "the token is unknown or revoked"));
    }
    let mut resp = StatusCode::NO_CONTENT.into_response();
    set_cookies(&mut resp, token, &new_token(), MAX_AGE);
    Ok(resp)
}

/// Sign out: clears the cookies.
#[utoipa::path(delete, path = "/api/v1/session", tag = "auth", security(()),
    responses((status = 204, description = "signed out")))]
pub async fn delete() -> Response {
    let mut resp = StatusCode::NO_CONTENT.into_response();
    set_cookies(&mut resp, "", "", 0);
    resp
}
