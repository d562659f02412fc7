//! The API's one error type and its mapping to the envelope of docs/api.md. Store
//! errors are mapped here, once.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pad_core::Lease;
use pad_core::api::{ErrorBody, ErrorCode, ErrorEnvelope};
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

/// The `lease_held` details: enough for a loser to log who won and move on.
pub fn lease_details(l: &Lease, now: pad_core::Timestamp) -> Value {
    json!({
        "lease_id": l.lease_id,
        "holder": l.holder,
        "session_id": l.session_id,
        "epoch": l.epoch,
        "acquired_at": l.acquired_at,
        "renewed_at": l.renewed_at,
        "expires_at": l.expires_at,
        "ttl_seconds": l.ttl_seconds,
        "expires_in_seconds": l.expires_in_seconds(now),
    })
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let message = e.to_string();
        match e {
            StoreError::Validation(v) => {
                ApiError::new(ErrorCode::ValidationFailed, message).with_details(json!({ "field": v.field }))
            }
            StoreError::InvalidTtl(e) => {
                // The bound and the number asked for, so a client can word
                // the refusal in its own units.
                let requested = e.got.strip_prefix("got ").and_then(|n| n.parse::<i64>().ok());
                ApiError::new(ErrorCode::InvalidTtl, message).with_details(
                    json!({ "field": "ttl_seconds", "max_seconds": e.max, "requested_seconds": requested }),
                )
            }
            StoreError::NotFound { .. } => ApiError::new(ErrorCode::NotFound, message),
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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = ErrorEnvelope { error: ErrorBody { code: self.code, message: self.message, details: self.details } };
        let mut resp = (status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}
