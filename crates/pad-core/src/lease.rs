//! The lease rules of docs/leases.md as pure functions over the stored lease state.
//!
//! A store reads an item's [`LeaseSlot`] inside its write transaction (or
//! encodes the same predicate in one conditional statement), asks these
//! functions what to do, and writes the answer. Keeping the rules here means
//! every backend agrees, and the rules can be tested without a database.

use chrono::Duration;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::Timestamp;
use chrono::{DateTime, Utc};

pub const TTL_MIN_SECONDS: u32 = 1;
pub const TTL_MAX_SECONDS: u32 = 86_400;
pub const TTL_DEFAULT_SECONDS: u32 = 15 * 60;
/// L19: the longest a lease may be held, renewals included: 30 days.
pub const MAX_HOLD_MAX_SECONDS: u32 = 30 * 86_400;

/// A live or past lease. `user_id` binds it to the authenticated user (L7)
/// and is not part of the wire shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Lease {
    /// L17: the grant's handle, unique within the workspace; a refresh or
    /// renew keeps it. (Absent from a server that predates handles: 0.)
    #[serde(default)]
    pub lease_id: i64,
    pub holder: String,
    pub session_id: Option<String>,
    pub epoch: i64,
    pub acquired_at: DateTime<Utc>,
    pub renewed_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub ttl_seconds: u32,
    /// L19: the lease cannot be renewed past this (`acquired_at` plus its
    /// max hold); absent when the lease has no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_until: Option<DateTime<Utc>>,
    #[serde(skip)]
    pub user_id: i64,
}

impl Lease {
    /// L19: the lease ends at its cap, not a TTL after its last renewal:
    /// renewing it again cannot move its expiry.
    pub fn is_capped(&self) -> bool {
        self.hold_until == Some(self.expires_at)
    }

    /// L5: a lease is live strictly before `expires_at`; at and after it, it
    /// reads as absent everywhere.
    pub fn is_live(&self, now: Timestamp) -> bool {
        now < self.expires_at
    }

    /// Whole seconds until expiry, rounded up, never negative: what
    /// `Retry-After` and `expires_in_seconds` carry.
    pub fn expires_in_seconds(&self, now: Timestamp) -> i64 {
        let micros = (self.expires_at - now).num_microseconds().unwrap_or(i64::MAX).max(0);
        (micros + 999_999) / 1_000_000
    }

    /// L3/L7: the same worker is the same holder label, the same user and the
    /// same session id (or neither gives one).
    fn is_same_worker(&self, c: &Claimant<'_>) -> bool {
        self.user_id == c.user_id && self.holder == c.holder && self.session_id.as_deref() == c.session_id
    }

    /// L4/L6/L7: renew and release identify by holder and user; the epoch,
    /// not the session id, is their proof of which grant they hold.
    fn is_same_holder(&self, c: &Claimant<'_>) -> bool {
        self.user_id == c.user_id && self.holder == c.holder
    }
}

/// What a store keeps per item: the lease as last written (live or not; it
/// is `None` after a release) and the highest epoch ever granted, which
/// survives release so epochs are never reused (docs/leases.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseSlot {
    pub current: Option<Lease>,
    pub last_epoch: i64,
}

impl LeaseSlot {
    /// The lease if it is live at `now` (L5).
    pub fn live(&self, now: Timestamp) -> Option<&Lease> {
        self.current.as_ref().filter(|l| l.is_live(now))
    }
}

/// L17: how a caller names the lease it holds: its epoch, its `lease_id`,
/// or both. Every given part must match the live lease (docs/leases.md L17).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaseHandle {
    pub epoch: Option<i64>,
    pub lease_id: Option<i64>,
}

impl LeaseHandle {
    pub fn epoch(epoch: i64) -> Self {
        LeaseHandle { epoch: Some(epoch), lease_id: None }
    }
    pub fn lease_id(lease_id: i64) -> Self {
        LeaseHandle { epoch: None, lease_id: Some(lease_id) }
    }
    /// Neither part given: no fence.
    pub fn is_empty(&self) -> bool {
        self.epoch.is_none() && self.lease_id.is_none()
    }
    /// Does `l` answer to this handle? An empty handle matches any lease.
    pub fn matches(&self, l: &Lease) -> bool {
        self.epoch.is_none_or(|e| e == l.epoch) && self.lease_id.is_none_or(|id| id == l.lease_id)
    }
}

/// L18: how a lease ended.
pub use crate::model::LeaseEnd;

/// L18: a lease that has ended, as the item keeps showing it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LastLease {
    pub lease_id: i64,
    pub epoch: i64,
    pub holder: String,
    pub session_id: Option<String>,
    pub acquired_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub ended: LeaseEnd,
    /// The handoff note written under this lease (claim, renew, fail), if any.
    pub note: Option<String>,
    /// L7: when an owner broke it, the reason they gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// L7: when an owner broke it, that owner's email.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken_by: Option<String>,
}

impl LastLease {
    pub fn of(l: &Lease, ended: LeaseEnd, ended_at: Timestamp, note: Option<String>) -> Self {
        LastLease {
            lease_id: l.lease_id,
            epoch: l.epoch,
            holder: l.holder.clone(),
            session_id: l.session_id.clone(),
            acquired_at: l.acquired_at,
            ended_at,
            ended,
            note,
            reason: None,
            broken_by: None,
        }
    }

    /// Is this the lease `handle` names? An empty handle names none.
    pub fn is_named_by(&self, handle: LeaseHandle) -> bool {
        !handle.is_empty()
            && handle.epoch.is_none_or(|e| e == self.epoch)
            && handle.lease_id.is_none_or(|id| id == self.lease_id)
    }
}

/// L18 without a reaper: a recorded lease past its expiry reads as ended by
/// expiry at `expires_at`; otherwise the last ending the store recorded.
/// `current_note` is the note written under the recorded lease, if any.
pub fn last_lease(
    slot: &LeaseSlot, current_note: Option<&str>, recorded: Option<LastLease>, now: Timestamp,
) -> Option<LastLease> {
    match &slot.current {
        Some(l) if !l.is_live(now) => {
            Some(LastLease::of(l, LeaseEnd::Expired, l.expires_at, current_note.map(str::to_string)))
        }
        _ => recorded,
    }
}

/// L14: the wait before a failed item is handed out again by claim-next:
/// `base` seconds after the first failure, doubling with each one, at most
/// `max` seconds.
pub fn retry_backoff(failures: i64, base_seconds: u32, max_seconds: u32) -> Duration {
    let doublings = u32::try_from(failures.saturating_sub(1).clamp(0, 62)).unwrap_or(62);
    let secs = i64::from(base_seconds).saturating_mul(1i64.checked_shl(doublings).unwrap_or(i64::MAX));
    Duration::seconds(secs.clamp(0, i64::from(max_seconds)))
}

/// Who is asking: the authenticated user, the holder label and an optional
/// session id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claimant<'a> {
    pub user_id: i64,
    pub holder: &'a str,
    pub session_id: Option<&'a str>,
}

/// A lease TTL, always within `[1, 86400]` seconds (L8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ttl(u32);

/// L8: the TTL asked for was out of range or not a whole number of seconds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ttl_seconds must be a whole number of seconds from 1 to {max} (got {requested})")]
pub struct InvalidTtl {
    pub requested: RequestedTtl,
    /// The longest TTL allowed where it was asked for.
    pub max: u32,
}

/// What a refused TTL asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestedTtl {
    /// A whole number of seconds, out of range.
    Seconds(i64),
    /// Not a whole number (`1.5`, `"x"`): the value as the request wrote it.
    NotWhole(String),
}

impl RequestedTtl {
    /// The number of seconds asked for, when it was one.
    pub fn seconds(&self) -> Option<i64> {
        match self {
            RequestedTtl::Seconds(n) => Some(*n),
            RequestedTtl::NotWhole(_) => None,
        }
    }
}

impl std::fmt::Display for RequestedTtl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestedTtl::Seconds(n) => write!(f, "{n}"),
            RequestedTtl::NotWhole(written) => f.write_str(written),
        }
    }
}

impl Ttl {
    /// Resolves a requested TTL against a workspace's default and maximum.
    /// `requested` is `None` when the caller gave none.
    pub fn resolve(requested: Option<i64>, default_seconds: u32, max_seconds: u32) -> Result<Ttl, InvalidTtl> {
        let max = max_seconds.clamp(TTL_MIN_SECONDS, TTL_MAX_SECONDS);
        let secs = requested.unwrap_or(i64::from(default_seconds.min(max)));
        if secs < i64::from(TTL_MIN_SECONDS) || secs > i64::from(max) {
            return Err(InvalidTtl { requested: RequestedTtl::Seconds(secs), max });
        }
        Ok(Ttl(secs as u32))
    }

    pub fn seconds(self) -> u32 {
        self.0
    }

    pub fn duration(self) -> Duration {
        Duration::seconds(i64::from(self.0))
    }
}

/// L19: an expiry a TTL from `now`, never past the lease's cap.
pub fn capped_expiry(now: Timestamp, ttl_seconds: u32, hold_until: Option<Timestamp>) -> Timestamp {
    let by_ttl = now + Duration::seconds(i64::from(ttl_seconds));
    hold_until.map_or(by_ttl, |cap| by_ttl.min(cap))
}

/// What a claim asks for: its TTL (L8) and its cap (L19), both resolved
/// against the workspace's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terms {
    pub ttl: Ttl,
    pub max_hold_seconds: Option<u32>,
}

/// A claim with no cap.
impl From<Ttl> for Terms {
    fn from(ttl: Ttl) -> Self {
        Terms { ttl, max_hold_seconds: None }
    }
}

/// L19: why a requested max hold was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidMaxHold(pub String);

/// L19: a claim's cap. `requested` may only lower the workspace's
/// (`workspace`, `None` when off) and may not be below the claim's own TTL.
/// A workspace cap below a claim's TTL caps the grant itself.
pub fn resolve_max_hold(
    requested: Option<i64>, workspace: Option<u32>, ttl: Ttl,
) -> Result<Option<u32>, InvalidMaxHold> {
    let Some(secs) = requested else { return Ok(workspace) };
    let ceiling = workspace.unwrap_or(MAX_HOLD_MAX_SECONDS);
    if secs < i64::from(ttl.seconds()) {
        return Err(InvalidMaxHold(format!("must be at least the lease's TTL ({}s); got {secs}s", ttl.seconds())));
    }
    if secs > i64::from(ceiling) {
        let whose = if workspace.is_some() { "the workspace's max hold" } else { "30 days" };
        return Err(InvalidMaxHold(format!("must be at most {whose} ({ceiling}s); got {secs}s")));
    }
    Ok(Some(u32::try_from(secs).unwrap_or(ceiling)))
}

/// The outcome of a claim (L1-L3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimDecision {
    /// L1: a new grant with the next epoch. `previous_expired` is true when a
    /// lease was still recorded but had expired (not released): L13 counts it.
    Grant { lease: Lease, previous_expired: bool },
    /// L3: the live holder's heartbeat; epoch and `acquired_at` unchanged.
    Refresh(Lease),
    /// L2: another worker's live lease.
    Held(Lease),
}

/// `refresh: false` (L17) turns the live holder's own claim into contention.
/// `new_lease_id` is the handle a grant gets (the store allocates it).
/// A refresh keeps the live lease's cap (L19); a grant's starts now.
pub fn decide_claim(
    slot: &LeaseSlot, c: &Claimant<'_>, terms: Terms, refresh: bool, new_lease_id: i64, now: Timestamp,
) -> ClaimDecision {
    let ttl = terms.ttl;
    let hold_until = terms.max_hold_seconds.map(|m| now + Duration::seconds(i64::from(m)));
    match slot.live(now) {
        Some(live) if refresh && live.is_same_worker(c) => ClaimDecision::Refresh(Lease {
            renewed_at: now,
            expires_at: capped_expiry(now, ttl.seconds(), live.hold_until),
            ttl_seconds: ttl.seconds(),
            ..live.clone()
        }),
        Some(live) => ClaimDecision::Held(live.clone()),
        None => ClaimDecision::Grant {
            lease: Lease {
                lease_id: new_lease_id,
                holder: c.holder.to_string(),
                session_id: c.session_id.map(str::to_string),
                epoch: slot.last_epoch + 1,
                acquired_at: now,
                renewed_at: now,
                expires_at: capped_expiry(now, ttl.seconds(), hold_until),
                ttl_seconds: ttl.seconds(),
                hold_until,
                user_id: c.user_id,
            },
            previous_expired: slot.current.is_some(),
        },
    }
}

/// The outcome of a renew (L4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenewDecision {
    Renewed(Lease),
    /// No live lease, or one with another epoch: carries the live one if any.
    Lost(Option<Lease>),
    /// The epoch matches but the lease is another user's or holder's (L7).
    Held(Lease),
}

/// `ttl` of `None` keeps the lease's own TTL. `handle` names the lease by
/// epoch and/or `lease_id` (L17); the caller has checked it is not empty.
pub fn decide_renew(
    slot: &LeaseSlot, c: &Claimant<'_>, handle: LeaseHandle, ttl: Option<Ttl>, now: Timestamp,
) -> RenewDecision {
    match slot.live(now) {
        None => RenewDecision::Lost(None),
        Some(live) if !handle.matches(live) => RenewDecision::Lost(Some(live.clone())),
        Some(live) if !live.is_same_holder(c) => RenewDecision::Held(live.clone()),
        Some(live) => {
            let ttl_seconds = ttl.map_or(live.ttl_seconds, Ttl::seconds);
            RenewDecision::Renewed(Lease {
                renewed_at: now,
                // L19: never past the cap.
                expires_at: capped_expiry(now, ttl_seconds, live.hold_until),
                ttl_seconds,
                ..live.clone()
            })
        }
    }
}

/// The outcome of a release (L6, L7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseDecision {
    /// No lease or an expired one: `released: false`, not an error.
    NoLiveLease,
    /// Ours; the store clears it.
    Released(Lease),
    /// An owner's `--force` on someone else's live lease (L7).
    Broken(Lease),
    Held(Lease),
    /// An epoch was given and is not the live lease's.
    Lost(Lease),
}

/// `force` must already be authorized (only owners may break a lease).
pub fn decide_release(
    slot: &LeaseSlot, c: &Claimant<'_>, handle: LeaseHandle, force: bool, now: Timestamp,
) -> ReleaseDecision {
    let Some(live) = slot.live(now) else { return ReleaseDecision::NoLiveLease };
    if live.is_same_holder(c) && handle.matches(live) {
        return ReleaseDecision::Released(live.clone());
    }
    if force {
        return ReleaseDecision::Broken(live.clone());
    }
    if handle.matches(live) { ReleaseDecision::Held(live.clone()) } else { ReleaseDecision::Lost(live.clone()) }
}

/// Why a fenced end of a lease (complete, fail) was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndRefusal {
    /// No live lease, or one the handle does not name: carries the live one.
    Lost(Option<Box<Lease>>),
    /// The handle names the live lease but it is another holder's or user's.
    Held(Box<Lease>),
}

/// L14/L15: may the caller end its lease by completing or failing the item?
/// Like renew: the lease must be live, named by `handle`, and the caller's.
pub fn decide_end(
    slot: &LeaseSlot, c: &Claimant<'_>, handle: LeaseHandle, now: Timestamp,
) -> Result<Lease, EndRefusal> {
    match slot.live(now) {
        None => Err(EndRefusal::Lost(None)),
        Some(live) if handle.is_empty() || !handle.matches(live) => Err(EndRefusal::Lost(Some(Box::new(live.clone())))),
        Some(live) if !live.is_same_holder(c) => Err(EndRefusal::Held(Box::new(live.clone()))),
        Some(live) => Ok(live.clone()),
    }
}

/// L10: may a write fenced by `lease_epoch` go ahead? `Err` carries the live
/// lease, if any, for the `lease_lost` answer.
/// L17: `lease_id` may stand in for the epoch, or come with it.
pub fn check_fence(slot: &LeaseSlot, fence: LeaseHandle, now: Timestamp) -> Result<(), Option<Box<Lease>>> {
    if fence.is_empty() {
        return Ok(());
    }
    match slot.live(now) {
        Some(live) if fence.matches(live) => Ok(()),
        live => Err(live.cloned().map(Box::new)),
    }
}

/// L13: an item is quarantined once its expiry count reaches the workspace's
/// threshold (0 turns quarantine off), unless it already carries the label.
pub fn should_quarantine(expiries: i64, threshold: u32, labels: &[String]) -> bool {
    threshold > 0 && expiries >= i64::from(threshold) && !labels.iter().any(|l| l == crate::NEEDS_HUMAN)
}

#[cfg(test)]
mod tests;
