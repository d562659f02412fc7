//! The HTTP API's wire shapes (docs/api.md), shared by the server and the typed
//! client so the two cannot drift apart. Item and lease shapes live in
//! [`crate::model`] and [`crate::lease`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{Comment, Kind, Lease, Member, Role, TokenInfo, Version, WorkspaceSettings};

mod batch;
pub use batch::{
    Batch, CLAIM_NEXT_COUNT_MAX, CLAIM_NEXT_WAIT_MAX_SECONDS, Grant, RENEW_LEASES_MAX, RenewEntry, RenewLeasesBody,
    RenewLeasesResponse, RenewResult,
};
mod import;
pub use import::{
    IMPORT_COMMENTS_MAX, IMPORT_ITEMS_MAX, IMPORT_KEY_MAX, IMPORT_KINDS_MAX, ImportItem, ImportRequest, ImportResult,
    ImportedRef, ValidImportItem,
};

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

/// A requested lease TTL in seconds, as request bodies carry it (L8). Only a
/// JSON integer deserializes: `1.5`, `"90"` or `true` fail with the
/// `invalid_ttl` message, and the server answers them with that code
/// ([`TTL_FIELD`]). The range, which depends on the workspace, is checked by
/// the store (`pad_core::lease::Ttl::resolve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct TtlSeconds(pub i64);

/// The body field a [`TtlSeconds`] travels in: a body that fails to parse
/// there is refused with `invalid_ttl`, not `bad_request`.
pub const TTL_FIELD: &str = "ttl_seconds";

impl TtlSeconds {
    pub fn seconds(self) -> i64 {
        self.0
    }
}

impl From<i64> for TtlSeconds {
    fn from(s: i64) -> Self {
        TtlSeconds(s)
    }
}

impl From<i32> for TtlSeconds {
    fn from(s: i32) -> Self {
        TtlSeconds(i64::from(s))
    }
}

impl From<u32> for TtlSeconds {
    fn from(s: u32) -> Self {
        TtlSeconds(i64::from(s))
    }
}

/// Saturates: a TTL past `i64::MAX` seconds is refused by the store's range
/// check all the same.
impl From<u64> for TtlSeconds {
    fn from(s: u64) -> Self {
        TtlSeconds(i64::try_from(s).unwrap_or(i64::MAX))
    }
}

impl<'de> Deserialize<'de> for TtlSeconds {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        value.as_i64().map(TtlSeconds).ok_or_else(|| {
            let e = crate::lease::InvalidTtl { got: format!("got {value}"), max: crate::lease::TTL_MAX_SECONDS };
            serde::de::Error::custom(e)
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceView {
    pub slug: String,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub settings: WorkspaceSettings,
    /// The caller's role here.
    pub role: Role,
    #[serde(default)]
    pub kinds: Vec<Kind>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceList {
    pub workspaces: Vec<WorkspaceView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWorkspace {
    #[schema(min_length = 1, max_length = 63, pattern = "^[a-z0-9][a-z0-9-]{0,62}$")]
    pub slug: String,
    /// Defaults to the slug.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKind {
    #[schema(min_length = 1, max_length = 32, pattern = "^[a-z0-9][a-z0-9-]{0,31}$")]
    pub name: String,
    #[schema(min_length = 1, max_length = 10, pattern = "^[A-Z][A-Z0-9]{0,9}$")]
    pub prefix: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct KindList {
    pub kinds: Vec<Kind>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetMember {
    #[schema(min_length = 3, max_length = 254, format = Email)]
    pub email: String,
    pub role: Role,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MemberList {
    pub members: Vec<Member>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    /// Whose token: defaults to the caller; only owners may name another member.
    #[serde(default)]
    #[schema(min_length = 3, max_length = 254)]
    pub email: Option<String>,
    /// `workspace`: the token reaches this workspace only; `user`: all of
    /// its user's workspaces, for one's own tokens only. Default: `user` for
    /// one's own token from an unscoped caller without `role`, else `workspace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<TokenScopeKind>,
    /// A role cap for a scoped token; the granted role is never higher than
    /// the minter's nor the token user's role in the workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
}

/// How far a new token reaches (docs/api.md, "Tokens").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TokenScopeKind {
    /// This workspace only.
    Workspace,
    /// Every workspace of the token's user.
    User,
}

/// The one time a token's secret is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenCreated {
    pub token: String,
    #[serde(flatten)]
    pub info: TokenInfo,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenList {
    pub tokens: Vec<TokenInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Me {
    pub email: String,
    pub workspaces: Vec<WorkspaceRole>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceRole {
    pub slug: String,
    pub role: Role,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct VersionList {
    pub versions: Vec<Version>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CommentList {
    pub comments: Vec<Comment>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewComment {
    /// Markdown, at most 64 KiB of UTF-8.
    #[schema(min_length = 1, max_length = 65536)]
    pub body: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimBody {
    /// Defaults to the caller's email.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 200)]
    pub holder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 200)]
    pub session_id: Option<String>,
    /// 1..=86400; default 900 (or the workspace's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 86400)]
    pub ttl_seconds: Option<TtlSeconds>,
    /// A handoff note for the next claimant (L12), at most 2000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2000)]
    pub note: Option<String>,
    /// L17: `false` refuses even the live holder with `lease_held` instead of
    /// extending its lease. Default `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh: Option<bool>,
    /// L19: the longest this lease may be held, renewals included: at least
    /// its TTL, at most the workspace's `max_hold_seconds`. Default: the
    /// workspace's (none when it has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 2592000)]
    pub max_hold_seconds: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClaimResponse {
    #[serde(rename = "ref")]
    pub item_ref: String,
    pub lease: Lease,
    pub refreshed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_holder: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewBody {
    /// The lease's epoch; `lease_id` may stand in for it (L17). One is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 200)]
    pub holder: Option<String>,
    /// Keeps the lease's TTL when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 86400)]
    pub ttl_seconds: Option<TtlSeconds>,
    /// A handoff note for the next claimant (L12), at most 2000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2000)]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RenewResponse {
    #[serde(rename = "ref")]
    pub item_ref: String,
    pub lease: Lease,
    /// L19: the lease has reached its max hold: it ends at `lease.expires_at`
    /// (= `lease.hold_until`) however often it is renewed.
    #[serde(default)]
    pub capped: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 200)]
    pub holder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<i64>,
    /// L17: the lease's handle, in place of or with `epoch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<i64>,
    /// Owners only: break another worker's live lease; needs `reason`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 500)]
    pub reason: Option<String>,
    /// L14: the holder's work succeeded: the release also records a success,
    /// which clears the failure handoff (docs/leases.md, "News that is true").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub succeeded: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReleaseResponse {
    #[serde(rename = "ref")]
    pub item_ref: String,
    pub released: bool,
    /// `released`, `broken` or `no live lease`.
    pub reason: String,
}

/// L15: set the status and end the lease in one fenced step.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteBody {
    /// The lease's epoch or `lease_id` (one is required; if both, both must match).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<i64>,
    /// Defaults to the caller's email.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 200)]
    pub holder: Option<String>,
    /// Default `done`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<crate::Status>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CompleteResponse {
    #[serde(rename = "ref")]
    pub item_ref: String,
    /// The item after the change; its `last_lease` says `ended: completed`.
    pub item: crate::Item,
}

/// L14: report a failed attempt and end the lease.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailBody {
    /// The lease's epoch or `lease_id` (one is required; if both, both must match).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<i64>,
    /// Defaults to the caller's email.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 200)]
    pub holder: Option<String>,
    /// Kept for the next claimant (`previous_note`) and as `last_failure_note`;
    /// at most 2000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2000)]
    pub note: Option<String>,
    /// Quarantine at this many failures instead of the workspace's
    /// `quarantine_after_failures` (e.g. `pad drain --max-attempts`); 1..=1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 1000)]
    pub max_failures: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FailResponse {
    #[serde(rename = "ref")]
    pub item_ref: String,
    /// The item after the failure: `failures`, `retry_at`, `last_lease`.
    pub item: crate::Item,
    /// True when this failure quarantined the item (`needs-human`).
    pub quarantined: bool,
}

/// Query of `GET …/events`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Events with a greater id; 0 (the default) is from the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<i64>,
    /// Page size, default 100; values outside 1..=1000 are clamped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// Only events of this item.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    #[param(rename = "ref")]
    pub item_ref: Option<String>,
    /// Only events of these types, comma-separated (`lease.claimed,lease.released`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[param(rename = "type")]
    pub kind: Option<String>,
}

impl EventsQuery {
    /// The store filter, or the field that is wrong.
    pub fn filter(&self) -> Result<crate::EventFilter, crate::ValidationError> {
        let item_ref = self.item_ref.as_deref().map(|r| crate::ItemRef::parse_field("ref", r)).transpose()?;
        let kinds = split(&self.kind)
            .into_iter()
            .map(|k| k.parse::<crate::EventKind>().map_err(|e| crate::ValidationError::new("type", e.message)))
            .collect::<Result<_, _>>()?;
        Ok(crate::EventFilter { item_ref, kinds })
    }
}

/// Query of `GET …/items`. Multi-valued filters are comma-separated
/// (`status=open,in-progress`); `label=a,b` means both labels.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leased: Option<bool>,
    /// Case-insensitive substring of title or body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(max_length = 200)]
    pub q: Option<String>,
    /// Only children of this item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Page size, default 50; values outside 1..=500 are clamped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeleteQuery {
    /// Fencing (L10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_epoch: Option<i64>,
    /// Fencing by handle (L17).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<i64>,
}

/// A page of the event log, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EventPage {
    pub events: Vec<crate::Event>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ItemPage {
    pub items: Vec<crate::Item>,
    pub next_cursor: Option<String>,
}

fn split(s: &Option<String>) -> Vec<&str> {
    s.as_deref().map(|s| s.split(',').map(str::trim).filter(|p| !p.is_empty()).collect()).unwrap_or_default()
}

impl ListQuery {
    /// The store filter this query asks for, or the field that is wrong.
    pub fn filter(&self) -> Result<crate::ItemFilter, crate::ValidationError> {
        use crate::ValidationError;
        let named = |field: &'static str| move |e: ValidationError| ValidationError::new(field, e.message);
        Ok(crate::ItemFilter {
            status: split(&self.status)
                .into_iter()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(named("status"))?,
            kind: split(&self.kind).into_iter().map(str::to_ascii_lowercase).collect(),
            labels: split(&self.label).into_iter().map(str::to_string).collect(),
            priority: split(&self.priority)
                .into_iter()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(named("priority"))?,
            assignee: self.assignee.clone(),
            leased: self.leased,
            q: self.q.clone().filter(|q| !q.is_empty()),
            parent: self.parent.as_deref().map(|p| crate::ItemRef::parse_field("parent", p)).transpose()?,
            include_deleted: false,
        })
    }
}

/// Query of `GET …/frontier`: the [`crate::FrontierFilter`] fields, lists
/// comma-separated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct FrontierQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_priority: Option<crate::Priority>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autonomous: Option<bool>,
    /// Refs to skip, comma-separated (at most 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<String>,
    /// Skip items whose last lease was taken with this session id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(min_length = 1, max_length = 200)]
    pub skip_session: Option<String>,
    /// At most this many, default 50; values outside 1..=500 are clamped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

impl FrontierQuery {
    pub fn filter(&self) -> crate::FrontierFilter {
        let list = |s: &Option<String>| split(s).into_iter().map(str::to_string).collect();
        crate::FrontierFilter {
            kinds: list(&self.kind),
            labels: list(&self.label),
            without_labels: list(&self.without_label),
            min_priority: self.min_priority,
            parent: self.parent.clone(),
            autonomous: self.autonomous.unwrap_or(false),
            exclude: list(&self.exclude),
            skip_session: self.skip_session.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FrontierList {
    pub items: Vec<crate::Item>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimNextBody {
    #[serde(default, deserialize_with = "object")]
    pub filter: crate::FrontierFilter,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 200)]
    pub holder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 200)]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 86400)]
    pub ttl_seconds: Option<TtlSeconds>,
    /// A handoff note for the next claimant (L12), at most 2000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2000)]
    pub note: Option<String>,
    /// L19: as in a claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 2592000)]
    pub max_hold_seconds: Option<i64>,
    /// How many items to claim at once, each under its own lease: 1..=32,
    /// default 1. Fewer are granted when fewer are ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 32)]
    pub count: Option<u32>,
    /// A long poll: when nothing is ready, wait up to this many seconds
    /// (0..=30, default 0) for an item to become ready, and answer as soon as
    /// one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 30)]
    pub wait_seconds: Option<u32>,
}

/// A nested object must be a JSON object: serde would otherwise read an
/// array into a struct field by field.
fn object<'de, D: serde::Deserializer<'de>, T: serde::de::DeserializeOwned>(d: D) -> Result<T, D::Error> {
    use serde::de::Error;
    let value = serde_json::Value::deserialize(d)?;
    if !value.is_object() {
        return Err(D::Error::custom(format!("expected a JSON object, got {}", json_kind(&value))));
    }
    serde_json::from_value(value).map_err(D::Error::custom)
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// `grants` holds every item granted (none when nothing is ready); `item`,
/// `lease` and the previous note and holder repeat the first grant's, and
/// are null when there is none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClaimNextResponse {
    pub item: Option<crate::Item>,
    pub lease: Option<Lease>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_holder: Option<String>,
    #[serde(default)]
    pub grants: Vec<Grant>,
}

impl ClaimNextResponse {
    /// The answer for these grants, the first repeated in the single fields.
    pub fn new(grants: Vec<Grant>) -> Self {
        let first = grants.first();
        ClaimNextResponse {
            item: first.map(|g| g.item.clone()),
            lease: first.map(|g| g.lease.clone()),
            previous_note: first.and_then(|g| g.previous_note.clone()),
            previous_holder: first.and_then(|g| g.previous_holder.clone()),
            grants,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::PartialSchema;

    /// The OpenAPI attributes take literals; these are the enforced limits.
    #[test]
    fn lease_bodies_state_the_enforced_limits() {
        for schema in [ClaimBody::schema(), RenewBody::schema(), ReleaseBody::schema(), ClaimNextBody::schema()] {
            let s = serde_json::to_value(schema).unwrap();
            assert_eq!(s["properties"]["holder"]["maxLength"], crate::NAME_MAX, "{s}");
            assert_eq!(s["properties"]["holder"]["minLength"], 1);
            if let Some(ttl) = s["properties"].get("ttl_seconds") {
                assert_eq!(ttl["maximum"], crate::lease::TTL_MAX_SECONDS);
            }
        }
        let new = serde_json::to_value(CreateWorkspace::schema()).unwrap();
        assert_eq!(new["properties"]["name"]["maxLength"], crate::NAME_MAX);
        let c = serde_json::to_value(NewComment::schema()).unwrap();
        assert_eq!(c["properties"]["body"]["maxLength"], crate::COMMENT_MAX_BYTES);
    }
}
