//! The error envelope and the error-code table (docs/api.md, "Errors"): each
//! code's HTTP status and CLI exit code, read by server and client alike.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use super::{Batch, TTL_FIELD};
use crate::Lease;
use crate::lease::{InvalidTtl, RequestedTtl, TTL_MAX_SECONDS};
use crate::validate::ValidationError;

/// The stable error codes of docs/api.md, with their HTTP status and CLI exit
/// code: the one table both ends read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    BadRequest,
    ValidationFailed,
    InvalidTtl,
    Unauthorized,
    Forbidden,
    NotFound,
    LeaseHeld,
    LeaseLost,
    UpdateConflict,
    /// 405: the route exists, the method does not. Not in the contract's original table; it
    /// keeps 405 distinct from bad input (see docs/api.md).
    MethodNotAllowed,
    PayloadTooLarge,
    UnsupportedMediaType,
    RateLimited,
    InternalError,
    Unavailable,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::ValidationFailed => "validation_failed",
            ErrorCode::InvalidTtl => "invalid_ttl",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::LeaseHeld => "lease_held",
            ErrorCode::LeaseLost => "lease_lost",
            ErrorCode::UpdateConflict => "update_conflict",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::InternalError => "internal_error",
            ErrorCode::Unavailable => "unavailable",
        }
    }

    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::BadRequest | ErrorCode::ValidationFailed | ErrorCode::InvalidTtl => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::LeaseHeld | ErrorCode::LeaseLost | ErrorCode::UpdateConflict => 409,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::RateLimited => 429,
            ErrorCode::InternalError => 500,
            ErrorCode::Unavailable => 503,
        }
    }

    /// the exit code of README.md's tables.
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorCode::BadRequest
            | ErrorCode::ValidationFailed
            | ErrorCode::InvalidTtl
            | ErrorCode::MethodNotAllowed
            | ErrorCode::PayloadTooLarge
            | ErrorCode::UnsupportedMediaType => 2,
            ErrorCode::Unauthorized | ErrorCode::Forbidden => 4,
            ErrorCode::NotFound => 5,
            ErrorCode::LeaseHeld | ErrorCode::LeaseLost | ErrorCode::UpdateConflict => 7,
            ErrorCode::RateLimited | ErrorCode::Unavailable => 8,
            ErrorCode::InternalError => 1,
        }
    }
}

/// `{"error": {...}}`: every non-2xx answer has this body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    /// Code-specific: `field` for validation; the live lease for `lease_held`;
    /// `current` and `ended` for `lease_lost`; both timestamps for `update_conflict`.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub details: serde_json::Value,
}

impl ErrorBody {
    /// `validation_failed`, the field named in `details.field` and at the
    /// start of the message (docs/api.md, "Errors").
    pub fn validation(e: &ValidationError) -> Self {
        ErrorBody { code: ErrorCode::ValidationFailed, message: e.to_string(), details: json!({ "field": e.field }) }
    }

    /// `invalid_ttl` (L8), from the refusal's fields: the bound, and the
    /// number asked for when there was one, so a client can word the
    /// refusal in its own units.
    pub fn invalid_ttl(e: &InvalidTtl) -> Self {
        ErrorBody {
            code: ErrorCode::InvalidTtl,
            message: e.to_string(),
            details: json!({
                "field": TTL_FIELD,
                "max_seconds": e.max,
                "requested_seconds": e.requested.seconds(),
            }),
        }
    }

    /// The refusal of a number field given something that is not a whole
    /// number (a fraction, a string, one past 64 bits), as its rule words
    /// it, from the value given: a TTL is the lease rule's `invalid_ttl`
    /// (L8); claim-next's `count` and `wait_seconds` (or `wait`) are
    /// `validation_failed` as when out of range (docs/api.md, "Batches and
    /// long polls"). `None` for any other field. The server answers a body
    /// that fails to parse there with it; the MCP tools refuse such an
    /// argument with it too.
    pub fn unreadable_number(field: &str, given: &serde_json::Value) -> Option<Self> {
        if field == TTL_FIELD {
            let requested = RequestedTtl::NotWhole(given.to_string());
            return Some(Self::invalid_ttl(&InvalidTtl { requested, max: TTL_MAX_SECONDS }));
        }
        Batch::unreadable(field, given).map(|e| Self::validation(&e))
    }

    /// A refusal of a field inside the body's object `parent` (an end's
    /// `next`, a renewal's `leases[1]`): the field is named `parent.FIELD`
    /// and the message starts with `parent: ` (docs/api.md, "The next item
    /// in the same call").
    pub fn within(mut self, parent: &str) -> Self {
        if let Some(field) = self.details.get("field").and_then(|f| f.as_str()).map(str::to_string) {
            self.details["field"] = serde_json::Value::String(format!("{parent}.{field}"));
        }
        self.message = format!("{parent}: {}", self.message);
        self
    }
}

/// The `details` of a `lease_held` refusal (and the `current` lease of a
/// `lease_lost` one): the live lease, enough for a loser to log who won and
/// move on (docs/leases.md L2). The server writes it, the client reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LeaseHeldDetails {
    /// L17: the live lease's handle (0 from a server that predates handles).
    #[serde(default)]
    pub lease_id: i64,
    pub holder: String,
    #[serde(default)]
    pub session_id: Option<String>,
    pub epoch: i64,
    pub acquired_at: DateTime<Utc>,
    pub renewed_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    #[serde(default)]
    pub ttl_seconds: u32,
    pub expires_in_seconds: i64,
}

impl LeaseHeldDetails {
    pub fn new(l: &Lease, now: DateTime<Utc>) -> Self {
        LeaseHeldDetails {
            lease_id: l.lease_id,
            holder: l.holder.clone(),
            session_id: l.session_id.clone(),
            epoch: l.epoch,
            acquired_at: l.acquired_at,
            renewed_at: l.renewed_at,
            expires_at: l.expires_at,
            ttl_seconds: l.ttl_seconds,
            expires_in_seconds: l.expires_in_seconds(now),
        }
    }
}
