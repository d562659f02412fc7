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
    slot: &LeaseSlot,
    current_note: Option<&str>,
    recorded: Option<LastLease>,
    now: Timestamp,
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

/// L8: the TTL was out of range or not a whole number of seconds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ttl_seconds must be a whole number of seconds from 1 to {max} ({got})")]
pub struct InvalidTtl {
    pub got: String,
    pub max: u32,
}

impl Ttl {
    /// Resolves a requested TTL against a workspace's default and maximum.
    /// `requested` is `None` when the caller gave none.
    pub fn resolve(requested: Option<i64>, default_seconds: u32, max_seconds: u32) -> Result<Ttl, InvalidTtl> {
        let max = max_seconds.clamp(TTL_MIN_SECONDS, TTL_MAX_SECONDS);
        let secs = requested.unwrap_or(i64::from(default_seconds.min(max)));
        if secs < i64::from(TTL_MIN_SECONDS) || secs > i64::from(max) {
            return Err(InvalidTtl { got: format!("got {secs}"), max });
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
    requested: Option<i64>,
    workspace: Option<u32>,
    ttl: Ttl,
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
    slot: &LeaseSlot,
    c: &Claimant<'_>,
    terms: Terms,
    refresh: bool,
    new_lease_id: i64,
    now: Timestamp,
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
    slot: &LeaseSlot,
    c: &Claimant<'_>,
    handle: LeaseHandle,
    ttl: Option<Ttl>,
    now: Timestamp,
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
    slot: &LeaseSlot,
    c: &Claimant<'_>,
    handle: LeaseHandle,
    force: bool,
    now: Timestamp,
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
    slot: &LeaseSlot,
    c: &Claimant<'_>,
    handle: LeaseHandle,
    now: Timestamp,
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
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn t(secs: i64) -> Timestamp {
        chrono::Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap()
    }
    fn ttl(s: i64) -> Ttl {
        Ttl::resolve(Some(s), TTL_DEFAULT_SECONDS, TTL_MAX_SECONDS).unwrap()
    }
    const A: Claimant<'static> = Claimant { user_id: 1, holder: "runner-a", session_id: None };
    const B: Claimant<'static> = Claimant { user_id: 1, holder: "runner-b", session_id: None };

    fn granted(slot: &mut LeaseSlot, c: &Claimant<'_>, secs: i64, now: Timestamp) -> Lease {
        match decide_claim(slot, c, ttl(secs).into(), true, slot.last_epoch + 100, now) {
            ClaimDecision::Grant { lease, .. } => {
                slot.last_epoch = lease.epoch;
                slot.current = Some(lease.clone());
                lease
            }
            other => panic!("expected a grant, got {other:?}"),
        }
    }

    #[test]
    fn l8_ttl_bounds() {
        assert!(Ttl::resolve(Some(0), 900, 86_400).is_err());
        assert!(Ttl::resolve(Some(-1), 900, 86_400).is_err());
        assert!(Ttl::resolve(Some(86_401), 900, 86_400).is_err());
        assert_eq!(Ttl::resolve(Some(86_400), 900, 86_400).unwrap().seconds(), 86_400);
        assert_eq!(Ttl::resolve(None, 900, 86_400).unwrap().seconds(), 900);
        // A workspace may lower the maximum; the default follows it down.
        assert!(Ttl::resolve(Some(600), 900, 300).is_err());
        assert_eq!(Ttl::resolve(None, 900, 300).unwrap().seconds(), 300);
        // On the wire only a JSON integer is a TTL, so a typo never
        // silently becomes a default.
        use crate::api::TtlSeconds;
        let e = serde_json::from_str::<TtlSeconds>("1.5").unwrap_err().to_string();
        assert!(e.starts_with("ttl_seconds must be a whole number of seconds from 1 to 86400 (got 1.5)"), "{e}");
        assert!(serde_json::from_str::<TtlSeconds>("\"x\"").is_err());
        assert_eq!(serde_json::from_str::<TtlSeconds>("30").unwrap(), TtlSeconds(30));
    }

    #[test]
    fn l1_l2_l3_grant_contend_refresh() {
        let mut slot = LeaseSlot::default();
        let l = granted(&mut slot, &A, 60, t(0));
        assert_eq!((l.epoch, l.acquired_at, l.expires_at), (1, t(0), t(60)));
        assert!(
            matches!(decide_claim(&slot, &B, ttl(60).into(), true, slot.last_epoch + 100, t(10)), ClaimDecision::Held(h) if h.holder == "runner-a")
        );
        match decide_claim(&slot, &A, ttl(120).into(), true, slot.last_epoch + 100, t(10)) {
            ClaimDecision::Refresh(r) => {
                assert_eq!((r.epoch, r.acquired_at, r.renewed_at, r.expires_at), (1, t(0), t(10), t(130)));
            }
            other => panic!("{other:?}"),
        }
        // Same holder label, different session: contention.
        let other_session = Claimant { session_id: Some("s2"), ..A };
        assert!(matches!(
            decide_claim(&slot, &other_session, ttl(60).into(), true, slot.last_epoch + 100, t(10)),
            ClaimDecision::Held(_)
        ));
        // Same holder label, other user: contention (L7).
        let impostor = Claimant { user_id: 2, ..A };
        assert!(matches!(
            decide_claim(&slot, &impostor, ttl(60).into(), true, slot.last_epoch + 100, t(10)),
            ClaimDecision::Held(_)
        ));
    }

    #[test]
    fn l5_expiry_is_exact() {
        let mut slot = LeaseSlot::default();
        granted(&mut slot, &A, 60, t(0));
        assert!(matches!(
            decide_claim(&slot, &B, ttl(60).into(), true, slot.last_epoch + 100, t(59)),
            ClaimDecision::Held(_)
        ));
        match decide_claim(&slot, &B, ttl(60).into(), true, slot.last_epoch + 100, t(60)) {
            ClaimDecision::Grant { lease, previous_expired } => {
                assert_eq!(lease.epoch, 2);
                assert!(previous_expired);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn l4_renew_needs_live_lease_and_epoch() {
        let mut slot = LeaseSlot::default();
        granted(&mut slot, &A, 60, t(0));
        assert!(
            matches!(decide_renew(&slot, &A, LeaseHandle::epoch(1), None, t(30)), RenewDecision::Renewed(l) if l.expires_at == t(90) && l.acquired_at == t(0))
        );
        assert_eq!(
            decide_renew(&slot, &A, LeaseHandle::epoch(2), None, t(30)),
            RenewDecision::Lost(slot.current.clone())
        );
        assert_eq!(decide_renew(&slot, &A, LeaseHandle::epoch(1), None, t(60)), RenewDecision::Lost(None));
        assert!(matches!(decide_renew(&slot, &B, LeaseHandle::epoch(1), None, t(30)), RenewDecision::Held(_)));
    }

    #[test]
    fn l6_l7_release() {
        let mut slot = LeaseSlot::default();
        assert_eq!(decide_release(&slot, &A, LeaseHandle::default(), false, t(0)), ReleaseDecision::NoLiveLease);
        granted(&mut slot, &A, 60, t(0));
        assert!(matches!(decide_release(&slot, &B, LeaseHandle::default(), false, t(1)), ReleaseDecision::Held(_)));
        assert!(matches!(decide_release(&slot, &A, LeaseHandle::epoch(7), false, t(1)), ReleaseDecision::Lost(_)));
        assert!(matches!(decide_release(&slot, &B, LeaseHandle::default(), true, t(1)), ReleaseDecision::Broken(_)));
        assert!(matches!(decide_release(&slot, &A, LeaseHandle::epoch(1), false, t(1)), ReleaseDecision::Released(_)));
        assert_eq!(decide_release(&slot, &A, LeaseHandle::default(), false, t(60)), ReleaseDecision::NoLiveLease);
    }

    #[test]
    fn l10_fence() {
        let mut slot = LeaseSlot::default();
        assert!(check_fence(&slot, LeaseHandle::default(), t(0)).is_ok());
        assert_eq!(check_fence(&slot, LeaseHandle::epoch(1), t(0)), Err(None));
        granted(&mut slot, &A, 60, t(0));
        assert!(check_fence(&slot, LeaseHandle::epoch(1), t(1)).is_ok());
        assert!(check_fence(&slot, LeaseHandle::epoch(1), t(60)).is_err());
    }

    #[test]
    fn l13_quarantine_threshold() {
        let none: Vec<String> = vec![];
        assert!(!should_quarantine(2, 3, &none));
        assert!(should_quarantine(3, 3, &none));
        assert!(!should_quarantine(3, 3, &["needs-human".to_string()]));
        assert!(!should_quarantine(10, 0, &none));
    }

    #[test]
    fn expires_in_rounds_up() {
        let mut slot = LeaseSlot::default();
        let l = granted(&mut slot, &A, 60, t(0));
        assert_eq!(l.expires_in_seconds(t(0)), 60);
        assert_eq!(l.expires_in_seconds(t(0) + Duration::milliseconds(1)), 60);
        assert_eq!(l.expires_in_seconds(t(61)), 0);
    }

    #[test]
    fn l17_lease_id_names_the_grant_and_no_refresh_is_contention() {
        let mut slot = LeaseSlot::default();
        let l = granted(&mut slot, &A, 60, t(0));
        assert_eq!(l.lease_id, 100);
        // A refresh keeps the handle; refresh: false makes even the holder contend.
        match decide_claim(&slot, &A, ttl(60).into(), true, 999, t(1)) {
            ClaimDecision::Refresh(r) => assert_eq!(r.lease_id, 100),
            other => panic!("{other:?}"),
        }
        assert!(matches!(decide_claim(&slot, &A, ttl(60).into(), false, 999, t(1)), ClaimDecision::Held(_)));
        let by_id = LeaseHandle::lease_id(100);
        assert!(matches!(decide_renew(&slot, &A, by_id, None, t(1)), RenewDecision::Renewed(_)));
        assert!(matches!(decide_renew(&slot, &A, LeaseHandle::lease_id(7), None, t(1)), RenewDecision::Lost(_)));
        // Both given: both must name the live lease.
        let mixed = LeaseHandle { epoch: Some(1), lease_id: Some(7) };
        assert!(matches!(decide_renew(&slot, &A, mixed, None, t(1)), RenewDecision::Lost(_)));
        assert!(check_fence(&slot, by_id, t(1)).is_ok());
        assert!(check_fence(&slot, mixed, t(1)).is_err());
        assert!(matches!(decide_release(&slot, &A, LeaseHandle::lease_id(7), false, t(1)), ReleaseDecision::Lost(_)));
        assert!(matches!(decide_release(&slot, &A, by_id, false, t(1)), ReleaseDecision::Released(_)));
    }

    #[test]
    fn l14_l15_end_needs_the_live_lease_named_and_ours() {
        let mut slot = LeaseSlot::default();
        assert_eq!(decide_end(&slot, &A, LeaseHandle::epoch(1), t(0)), Err(EndRefusal::Lost(None)));
        let l = granted(&mut slot, &A, 60, t(0));
        assert_eq!(decide_end(&slot, &A, LeaseHandle::epoch(1), t(1)), Ok(l.clone()));
        assert_eq!(decide_end(&slot, &A, LeaseHandle::lease_id(l.lease_id), t(1)), Ok(l.clone()));
        assert!(matches!(decide_end(&slot, &A, LeaseHandle::epoch(2), t(1)), Err(EndRefusal::Lost(Some(_)))));
        assert!(matches!(decide_end(&slot, &A, LeaseHandle::default(), t(1)), Err(EndRefusal::Lost(Some(_)))));
        assert!(matches!(decide_end(&slot, &B, LeaseHandle::epoch(1), t(1)), Err(EndRefusal::Held(_))));
        // An expired lease cannot be completed or failed.
        assert_eq!(decide_end(&slot, &A, LeaseHandle::epoch(1), t(60)), Err(EndRefusal::Lost(None)));
    }

    #[test]
    fn l14_backoff_doubles_from_base_to_cap() {
        let secs = |n| retry_backoff(n, 30, 3600).num_seconds();
        assert_eq!([secs(1), secs(2), secs(3), secs(4)], [30, 60, 120, 240]);
        assert_eq!(secs(8), 3600);
        assert_eq!(secs(1000), 3600);
        assert_eq!(secs(0), 30);
    }

    #[test]
    fn l18_expired_lease_reads_as_last_lease_ended_by_expiry() {
        let mut slot = LeaseSlot::default();
        assert_eq!(last_lease(&slot, None, None, t(0)), None);
        let l = granted(&mut slot, &A, 60, t(0));
        let recorded = LastLease::of(&l, LeaseEnd::Released, t(5), None);
        // While live, the recorded (previous) ending shows.
        assert_eq!(last_lease(&slot, Some("n"), Some(recorded.clone()), t(10)), Some(recorded.clone()));
        let expired = last_lease(&slot, Some("n"), Some(recorded), t(60)).unwrap();
        assert_eq!((expired.ended, expired.ended_at, expired.note.as_deref()), (LeaseEnd::Expired, t(60), Some("n")));
        assert_eq!(expired.lease_id, l.lease_id);
    }

    /// One step of a random history over three holders on one item.
    #[derive(Debug, Clone)]
    enum Op {
        Claim { who: usize, ttl: i64 },
        Renew { who: usize, epoch_offset: i64, ttl: Option<i64> },
        Release { who: usize, force: bool },
        Advance(i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..3usize, 1..20i64).prop_map(|(who, ttl)| Op::Claim { who, ttl }),
            (0..3usize, -1..2i64, proptest::option::of(1..20i64)).prop_map(|(who, epoch_offset, ttl)| Op::Renew {
                who,
                epoch_offset,
                ttl
            }),
            (0..3usize, any::<bool>()).prop_map(|(who, force)| Op::Release { who, force }),
            (0..15i64).prop_map(Op::Advance),
        ]
    }

    /// L19: renewals and refreshes never move a capped lease's expiry past
    /// `acquired_at + max_hold`; bad caps are refused.
    #[test]
    fn l19_a_cap_bounds_every_renewal() {
        let mut slot = LeaseSlot::default();
        let terms = Terms { ttl: ttl(60), max_hold_seconds: Some(150) };
        let ClaimDecision::Grant { lease, .. } = decide_claim(&slot, &A, terms, true, 1, t(0)) else { panic!() };
        assert_eq!((lease.hold_until, lease.expires_at), (Some(t(150)), t(60)));
        slot.current = Some(lease.clone());
        let mut now = 0;
        loop {
            now += 20;
            match decide_renew(&slot, &A, LeaseHandle::epoch(lease.epoch), None, t(now)) {
                RenewDecision::Renewed(l) => {
                    assert!(l.expires_at <= t(150), "renewed past the cap at {now}");
                    assert_eq!(l.is_capped(), l.expires_at == t(150));
                    slot.current = Some(l);
                }
                RenewDecision::Lost(None) => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(now, 160, "the lease ended at its cap");
        assert!(resolve_max_hold(Some(30), None, ttl(60)).unwrap_err().0.contains("TTL"));
        assert!(resolve_max_hold(Some(-1), None, ttl(60)).is_err());
        assert!(resolve_max_hold(Some(7200), Some(3600), ttl(60)).is_err());
        assert_eq!(resolve_max_hold(None, Some(3600), ttl(60)), Ok(Some(3600)));
        assert_eq!(resolve_max_hold(Some(600), Some(3600), ttl(60)), Ok(Some(600)));
        assert_eq!(resolve_max_hold(None, None, ttl(60)), Ok(None));
    }

    proptest! {
        /// L19: whatever the TTL, cap and renewal times, no lease outlives its cap.
        #[test]
        fn l19_no_lease_outlives_its_cap(ttl_s in 1_i64..600, extra in 0_u32..600, steps in proptest::collection::vec(1_i64..300, 1..20)) {
            let cap = u32::try_from(ttl_s).unwrap() + extra;
            let terms = Terms { ttl: ttl(ttl_s), max_hold_seconds: Some(cap) };
            let ClaimDecision::Grant { lease, .. } = decide_claim(&LeaseSlot::default(), &A, terms, true, 1, t(0)) else { panic!() };
            let mut slot = LeaseSlot { current: Some(lease.clone()), last_epoch: lease.epoch };
            let mut now = 0;
            for step in steps {
                now += step;
                if let RenewDecision::Renewed(l) = decide_renew(&slot, &A, LeaseHandle::epoch(lease.epoch), None, t(now)) {
                    prop_assert!(l.expires_at <= t(i64::from(cap)));
                    slot.current = Some(l);
                }
                if let ClaimDecision::Refresh(l) = decide_claim(&slot, &A, ttl(ttl_s).into(), true, 2, t(now)) {
                    prop_assert!(l.expires_at <= t(i64::from(cap)));
                }
            }
        }

        /// For any interleaving: at most one live holder, epochs grow by one
        /// on every grant and never on a refresh, expiry is renewed_at + ttl.
        #[test]
        fn never_two_live_holders(ops in proptest::collection::vec(op(), 1..200)) {
            let holders = ["a", "b", "c"];
            let who = |i: usize| Claimant { user_id: i as i64 + 1, holder: holders[i], session_id: None };
            let mut slot = LeaseSlot::default();
            let mut now = t(0);
            let mut grants = 0i64;
            for op in ops {
                let before = slot.clone();
                match op {
                    Op::Claim { who: w, ttl: s } => match decide_claim(&slot, &who(w), ttl(s).into(), true, slot.last_epoch + 100, now) {
                        ClaimDecision::Grant { lease, .. } => {
                            prop_assert!(before.live(now).is_none(), "granted over a live lease");
                            grants += 1;
                            prop_assert_eq!(lease.epoch, grants);
                            prop_assert_eq!(lease.epoch, before.last_epoch + 1);
                            slot.last_epoch = lease.epoch;
                            slot.current = Some(lease);
                        }
                        ClaimDecision::Refresh(lease) => {
                            let live = before.live(now).expect("refresh of a live lease");
                            prop_assert_eq!(lease.epoch, live.epoch);
                            prop_assert_eq!(lease.acquired_at, live.acquired_at);
                            prop_assert_eq!(&lease.holder, &live.holder);
                            slot.current = Some(lease);
                        }
                        ClaimDecision::Held(h) => prop_assert_ne!(h.user_id, who(w).user_id),
                    },
                    Op::Renew { who: w, epoch_offset, ttl: s } => {
                        let epoch = slot.last_epoch + epoch_offset;
                        if let RenewDecision::Renewed(lease) = decide_renew(&slot, &who(w), LeaseHandle::epoch(epoch), s.map(ttl), now) {
                            let live = before.live(now).expect("renew of a live lease");
                            prop_assert_eq!(live.user_id, who(w).user_id);
                            prop_assert_eq!(lease.epoch, live.epoch);
                            slot.current = Some(lease);
                        }
                    }
                    Op::Release { who: w, force } => match decide_release(&slot, &who(w), LeaseHandle::default(), force, now) {
                        ReleaseDecision::Released(l) | ReleaseDecision::Broken(l) => {
                            prop_assert!(l.is_live(now));
                            slot.current = None;
                        }
                        ReleaseDecision::NoLiveLease => prop_assert!(before.live(now).is_none()),
                        ReleaseDecision::Held(_) | ReleaseDecision::Lost(_) => prop_assert!(!force),
                    },
                    Op::Advance(s) => now += Duration::seconds(s),
                }
                if let Some(l) = &slot.current {
                    prop_assert_eq!(l.expires_at, l.renewed_at + Duration::seconds(i64::from(l.ttl_seconds)));
                    prop_assert!(l.epoch <= slot.last_epoch);
                }
                prop_assert!(slot.last_epoch >= before.last_epoch);
            }
        }
    }
}
