//! The batch verbs' wire shapes (docs/api.md, "Batches and long polls"):
//! claim-next's `count` and `wait_seconds` (alias `wait`), its list of
//! grants, and one renewal call for many leases.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ErrorBody, TtlSeconds};
use crate::Lease;
use crate::validate::ValidationError;

/// The most grants one claim-next may ask for. A supervisor asks for as many
/// as it has free slots; past a few dozen, one answer holds leases whose TTL
/// starts ticking before their jobs can start.
pub const CLAIM_NEXT_COUNT_MAX: u32 = 32;

/// The longest a claim-next may wait for work. Below common proxies' idle
/// timeouts (60 s), so a long poll is not cut off on its way back.
pub const CLAIM_NEXT_WAIT_MAX_SECONDS: u32 = 30;

/// The most leases one renewal call may carry.
pub const RENEW_LEASES_MAX: usize = 100;

/// What a claim-next asks for beyond one item now: how many, and how long
/// to wait for the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    pub count: u32,
    pub wait: std::time::Duration,
}

impl Batch {
    /// `count` 1..=[`CLAIM_NEXT_COUNT_MAX`] (default 1), `wait_seconds`
    /// 0..=[`CLAIM_NEXT_WAIT_MAX_SECONDS`] (default 0: answer at once).
    pub fn new(count: Option<i64>, wait_seconds: Option<i64>) -> Result<Self, ValidationError> {
        Self::checked(count, wait_seconds.map(|w| (WAIT_FIELD, w)))
    }

    /// A claim-next body's batch. `wait` is `wait_seconds` by another name:
    /// a bad one is refused naming the field as given, and both at once are
    /// refused rather than one picked (docs/api.md, "Batches and long polls").
    pub fn of(body: &super::ClaimNextBody) -> Result<Self, ValidationError> {
        let wait = match (body.wait_seconds, body.wait) {
            (Some(_), Some(_)) => {
                let message = format!("give `{WAIT_FIELD}` or its alias `{WAIT_ALIAS}`, not both");
                return Err(ValidationError::new(WAIT_FIELD, message));
            }
            (Some(w), None) => Some((WAIT_FIELD, w)),
            (None, Some(w)) => Some((WAIT_ALIAS, w)),
            (None, None) => None,
        };
        Self::checked(body.count, wait)
    }

    fn checked(count: Option<i64>, wait: Option<(&str, i64)>) -> Result<Self, ValidationError> {
        let given = count.unwrap_or(1);
        let count = u32::try_from(given)
            .ok()
            .filter(|c| (1..=CLAIM_NEXT_COUNT_MAX).contains(c))
            .ok_or_else(|| out_of_range(COUNT_FIELD, given))?;
        let (field, given) = wait.unwrap_or((WAIT_FIELD, 0));
        let wait = u64::try_from(given)
            .ok()
            .filter(|w| *w <= u64::from(CLAIM_NEXT_WAIT_MAX_SECONDS))
            .ok_or_else(|| out_of_range(field, given))?;
        Ok(Batch { count, wait: std::time::Duration::from_secs(wait) })
    }

    /// The refusal of a `count` or `wait_seconds` (or `wait`) the body
    /// parser could not read as a whole number (a fraction, a string, one
    /// past 64 bits): the same `validation_failed` as one out of range
    /// (docs/api.md, "Batches and long polls"), worded from the value given.
    /// `None` for any other field; only claim-next's body has these.
    pub fn unreadable(field: &str, given: &serde_json::Value) -> Option<ValidationError> {
        [COUNT_FIELD, WAIT_FIELD, WAIT_ALIAS].contains(&field).then(|| out_of_range(field, given))
    }
}

/// The body fields a [`Batch`] is read from.
pub const COUNT_FIELD: &str = "count";
pub const WAIT_FIELD: &str = "wait_seconds";
/// `wait_seconds` by its other name.
pub const WAIT_ALIAS: &str = "wait";

fn out_of_range(field: &str, given: impl std::fmt::Display) -> ValidationError {
    let (min, max) = if field == COUNT_FIELD { (1, CLAIM_NEXT_COUNT_MAX) } else { (0, CLAIM_NEXT_WAIT_MAX_SECONDS) };
    ValidationError::new(field, format!("{field} must be a whole number between {min} and {max} (got {given})"))
}

/// One item granted by a claim-next: its own lease, epoch and event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Grant {
    pub item: crate::Item,
    pub lease: Lease,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_holder: Option<String>,
}

/// `POST …/leases/renew`: one heartbeat for many leases.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewLeasesBody {
    /// At most 100.
    #[schema(max_items = 100)]
    pub leases: Vec<RenewEntry>,
}

/// One lease to renew: a `RenewBody` with the item's ref.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewEntry {
    #[serde(rename = "ref")]
    pub item_ref: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 200)]
    pub holder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 86400)]
    pub ttl_seconds: Option<TtlSeconds>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2000)]
    pub note: Option<String>,
}

impl RenewEntry {
    /// The single renewal this entry stands for.
    pub fn body(&self) -> super::RenewBody {
        super::RenewBody {
            epoch: self.epoch,
            lease_id: self.lease_id,
            holder: self.holder.clone(),
            ttl_seconds: self.ttl_seconds,
            note: self.note.clone(),
        }
    }
}

/// The answers, in the order asked; each lease renewed or refused on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RenewLeasesResponse {
    pub results: Vec<RenewResult>,
}

/// `lease` when renewed, `error` (as a single renew would have answered)
/// when not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RenewResult {
    #[serde(rename = "ref")]
    pub item_ref: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// L19: as in a single renewal.
    #[serde(default)]
    pub capped: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_bounded_with_the_field_named() {
        assert_eq!(Batch::new(None, None).unwrap().count, 1);
        assert_eq!(Batch::new(Some(32), Some(30)).unwrap().wait.as_secs(), 30);
        let e = Batch::new(Some(0), None).unwrap_err();
        assert_eq!(e.field, "count");
        assert!(e.message.contains("between 1 and 32"), "{}", e.message);
        assert_eq!(Batch::new(Some(33), None).unwrap_err().field, "count");
        assert_eq!(Batch::new(None, Some(31)).unwrap_err().field, "wait_seconds");
        assert_eq!(Batch::new(Some(-1), None).unwrap_err().field, "count");
        let e = Batch::new(None, Some(-1)).unwrap_err();
        assert!(e.message.contains("between 0 and 30 (got -1)"), "{}", e.message);
    }

    #[test]
    fn a_batch_field_that_is_not_a_whole_number_is_refused_with_its_range() {
        let e = Batch::unreadable("wait_seconds", &serde_json::json!(-1)).unwrap();
        assert_eq!(e.field, "wait_seconds");
        assert!(e.message.contains("between 0 and 30 (got -1)"), "{}", e.message);
        let e = Batch::unreadable("count", &serde_json::json!("x")).unwrap();
        assert!(e.message.contains("between 1 and 32 (got \"x\")"), "{}", e.message);
        assert!(Batch::unreadable("ttl_seconds", &serde_json::json!(-1)).is_none());
        assert_eq!(Batch::unreadable("wait", &serde_json::json!(1.5)).unwrap().field, "wait");
    }

    #[test]
    fn wait_is_wait_seconds_by_another_name_and_not_both() {
        let body = |wait_seconds, wait| super::super::ClaimNextBody { wait_seconds, wait, ..Default::default() };
        assert_eq!(Batch::of(&body(None, Some(30))).unwrap().wait.as_secs(), 30);
        assert_eq!(Batch::of(&body(Some(5), None)).unwrap().wait.as_secs(), 5);
        let e = Batch::of(&body(None, Some(31))).unwrap_err();
        assert_eq!(e.field, "wait");
        assert!(e.message.contains("between 0 and 30 (got 31)"), "{}", e.message);
        let e = Batch::of(&body(Some(1), Some(1))).unwrap_err();
        assert!(e.message.contains("`wait_seconds`") && e.message.contains("`wait`"), "{}", e.message);
    }
}
