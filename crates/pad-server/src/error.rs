//! The API's one error type and its mapping to the envelope of docs/api.md. Store
//! errors are mapped here, once.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pad_core::Lease;
use pad_core::api::{ErrorBody, ErrorCode, ErrorEnvelope, LeaseHeldDetails};
use pad_store::StoreError;
use serde_json::{Value, json};

#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub details: Value,
    pub retry_after: Option<i64>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError { code, message: message.into(), details: json!({}), retry_after: None }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    pub fn bad_request(message: impl Into<String>, field: Option<&str>) -> Self {
        let e = ApiError::new(ErrorCode::BadRequest, message);
        match field {
            Some(f) => e.with_details(json!({ "field": f })),
            None => e,
        }
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(ErrorCode::Forbidden, message)
    }
}

/// The `lease_held` details (`pad_core::api::LeaseHeldDetails`, which the
/// client reads back).
fn lease_details(l: &Lease, now: pad_core::Timestamp) -> Value {
    serde_json::to_value(LeaseHeldDetails::new(l, now)).unwrap_or_default()
}

/// A refusal worded by the wire types (`ErrorBody`'s constructors), which
/// the MCP tools share.
impl From<ErrorBody> for ApiError {
    fn from(e: ErrorBody) -> Self {
        ApiError::new(e.code, e.message).with_details(e.details)
    }
}

/// A query or body the domain refused (`ListQuery::filter`, …): the same
/// answer as the store's validation.
impl From<pad_core::ValidationError> for ApiError {
    fn from(e: pad_core::ValidationError) -> Self {
        StoreError::from(e).into()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let message = e.to_string();
        match e {
            StoreError::Validation(v) => ErrorBody::validation(&v).into(),
            StoreError::InvalidTtl(e) => ErrorBody::invalid_ttl(&e).into(),
            StoreError::NotFound { .. } => ApiError::new(ErrorCode::NotFound, message),
            StoreError::Forbidden(_) => ApiError::forbidden(message),
            StoreError::LeaseHeld { lease, now } => ApiError {
                retry_after: Some(lease.expires_in_seconds(now).max(1)),
                details: lease_details(&lease, now),
                ..ApiError::new(ErrorCode::LeaseHeld, message)
            },
            StoreError::LeaseLost { current, now, ended } => ApiError::new(ErrorCode::LeaseLost, message)
                .with_details(json!({ "current": current.map(|l| lease_details(&l, now)), "ended": ended })),
            StoreError::UpdateConflict { expected, actual } => ApiError::new(ErrorCode::UpdateConflict, message)
                .with_details(json!({ "expected_updated_at": expected, "actual_updated_at": actual })),
            StoreError::Unavailable(detail) => {
                tracing::warn!(%detail, "store unavailable");
                ApiError {
                    retry_after: Some(1),
                    ..ApiError::new(ErrorCode::Unavailable, "the store is unavailable; retry shortly")
                }
            }
            StoreError::Internal(detail) => {
                tracing::error!(%detail, "internal store error");
                ApiError::new(ErrorCode::InternalError, "internal error")
            }
        }
    }
}

impl ApiError {
    /// 429 `rate_limited`, to try again in `wait` seconds.
    pub fn too_fast(wait: u64) -> Self {
        ApiError {
            retry_after: Some(i64::try_from(wait).unwrap_or(i64::MAX)),
            ..ApiError::new(ErrorCode::RateLimited, "too many requests of this kind; slow down")
        }
    }
}

impl ApiError {
    /// A refusal of a field inside the body's object `parent` (an end's
    /// `next`, a renewal's `leases[1]`): `ErrorBody::within`, keeping
    /// `Retry-After`.
    pub fn within(self, parent: &str) -> Self {
        let retry_after = self.retry_after;
        ApiError { retry_after, ..self.body().within(parent).into() }
    }

    /// The envelope's `error` part, for answers that carry one error per
    /// entry (`POST …/leases/renew`).
    pub fn body(self) -> ErrorBody {
        ErrorBody { code: self.code, message: self.message, details: self.details }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry_after = self.retry_after;
        let body = ErrorEnvelope { error: self.body() };
        let mut resp = (status, axum::Json(body)).into_response();
        if let Some(secs) = retry_after {
            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}
