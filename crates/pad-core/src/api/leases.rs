//! The lease verbs on the wire (docs/leases.md; docs/api.md, "Items and their leases"): the
//! TTL's one type, claim, renew, release, complete, fail, the frontier and
//! claim-next. The batch forms live in `batch.rs`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::Lease;

use super::{Grant, split};

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
            let requested = crate::lease::RequestedTtl::NotWhole(value.to_string());
            let e = crate::lease::InvalidTtl { requested, max: crate::lease::TTL_MAX_SECONDS };
            serde::de::Error::custom(e)
        })
    }
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

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
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
    /// Claim the next item in the same call, once this end is recorded: a
    /// claim-next body (`wait_seconds` must be 0), answered in `next`
    /// (docs/api.md, "The next item in the same call").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<ClaimNextBody>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReleaseResponse {
    #[serde(rename = "ref")]
    pub item_ref: String,
    pub released: bool,
    /// `released`, `broken` or `no live lease`.
    pub reason: String,
    /// With `next` in the body: the claim-next made once the end was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<ClaimNextResponse>,
    /// With `next` in the body, when that claim-next failed: why. The end
    /// itself was recorded; claim the next item with claim-next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_error: Option<super::ErrorBody>,
}

/// L15: set the status and end the lease in one fenced step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
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
    /// Claim the next item in the same call, once this end is recorded: a
    /// claim-next body (`wait_seconds` must be 0), answered in `next`
    /// (docs/api.md, "The next item in the same call").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<ClaimNextBody>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CompleteResponse {
    #[serde(rename = "ref")]
    pub item_ref: String,
    /// The item after the change; its `last_lease` says `ended: completed`.
    pub item: crate::Item,
    /// With `next` in the body: the claim-next made once the end was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<ClaimNextResponse>,
    /// With `next` in the body, when that claim-next failed: why. The end
    /// itself was recorded; claim the next item with claim-next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_error: Option<super::ErrorBody>,
}

/// L14: report a failed attempt and end the lease.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
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
    /// Claim the next item in the same call, once this end is recorded: a
    /// claim-next body (`wait_seconds` must be 0), answered in `next`
    /// (docs/api.md, "The next item in the same call").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<ClaimNextBody>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FailResponse {
    #[serde(rename = "ref")]
    pub item_ref: String,
    /// The item after the failure: `failures`, `retry_at`, `last_lease`.
    pub item: crate::Item,
    /// True when this failure quarantined the item (`needs-human`).
    pub quarantined: bool,
    /// With `next` in the body: the claim-next made once the end was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<ClaimNextResponse>,
    /// With `next` in the body, when that claim-next failed: why. The end
    /// itself was recorded; claim the next item with claim-next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_error: Option<super::ErrorBody>,
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
    pub count: Option<i64>,
    /// A long poll: when nothing is ready, wait up to this many seconds
    /// (0..=30, default 0) for an item to become ready, and answer as soon as
    /// one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 30)]
    pub wait_seconds: Option<i64>,
    /// `wait_seconds` by its other name: give one or the other, not both.
    // A field of its own rather than a serde alias: an alias would leave it
    // out of the schema, and both at once would be serde's bare "duplicate
    // field" instead of a refusal naming both (`Batch::of`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 30)]
    pub wait: Option<i64>,
}

impl ClaimNextBody {
    /// The long poll asked for, under either name (unchecked: the server
    /// checks it, `Batch::of`).
    pub fn wait_asked(&self) -> Option<i64> {
        self.wait_seconds.or(self.wait)
    }
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
