//! Inputs and outputs of the lease operations, with the one validation that
//! every backend runs before it writes.

use pad_core::lease::{self, InvalidTtl, LeaseHandle, Terms, Ttl};
use pad_core::model::validate_name;
use pad_core::validate::{self, Lines};
use pad_core::{Claimant, Item, Lease, LeaseEnd, Status, Timestamp, WorkspaceSettings};

use crate::{Actor, StoreError};

pub const NOTE_MAX: usize = 2000;
pub const REASON_MAX: usize = 500;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    pub actor: Actor,
    pub holder: String,
    pub session_id: Option<String>,
    /// Seconds; `None` takes the workspace default (L8).
    pub ttl_seconds: Option<i64>,
    /// L12 handoff note.
    pub note: Option<String>,
    /// L17: `false` answers even the live holder with `lease_held`.
    pub refresh: bool,
    /// L19: seconds; `None` takes the workspace's cap, if any.
    pub max_hold_seconds: Option<i64>,
}

/// The claim-next a lease end carries (docs/api.md, "The next item in the
/// same call"): made once the end succeeded, never when it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextClaim {
    pub filter: pad_core::FrontierFilter,
    pub req: ClaimRequest,
    pub count: u32,
}

/// What a lease end's next claim got: the grants, or why it failed (the
/// end stands either way).
pub type ClaimedNext = Result<Vec<(Item, ClaimOutcome)>, StoreError>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenewRequest {
    pub actor: Actor,
    pub holder: String,
    /// Epoch and/or lease id (L17); at least one.
    pub handle: LeaseHandle,
    /// `None` keeps the lease's TTL.
    pub ttl_seconds: Option<i64>,
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseRequest {
    pub actor: Actor,
    pub holder: String,
    /// When given, must name the live lease (L6, L17).
    pub handle: LeaseHandle,
    /// Break another worker's lease; the server allows it to owners only.
    pub force: bool,
    pub reason: Option<String>,
    /// L14: the holder's work succeeded (`pad run` after CMD exited 0):
    /// the release also records a success.
    pub succeeded: bool,
}

/// L15: complete an item under its lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompleteRequest {
    pub actor: Actor,
    pub holder: String,
    /// Epoch and/or lease id (L17); at least one.
    pub handle: LeaseHandle,
    pub status: Status,
}

/// L14: report a failed attempt under a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailRequest {
    pub actor: Actor,
    pub holder: String,
    /// Epoch and/or lease id (L17); at least one.
    pub handle: LeaseHandle,
    pub note: Option<String>,
    /// Overrides the workspace's `quarantine_after_failures`.
    pub max_failures: Option<u32>,
}

/// One expiry the observer recorded (L5/L13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedExpiry {
    /// The workspace's slug.
    pub workspace: String,
    /// How long the lease was held: from its grant to its expiry.
    pub held: chrono::Duration,
    /// This expiry quarantined the item (L13).
    pub quarantined: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailOutcome {
    pub item: Item,
    /// This failure quarantined the item.
    pub quarantined: bool,
}

/// The largest `max_failures` a fail request may carry.
pub const MAX_FAILURES_LIMIT: u32 = 1000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimOutcome {
    pub lease: Lease,
    pub refreshed: bool,
    pub previous_note: Option<String>,
    pub previous_holder: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseOutcome {
    pub reason: ReleaseReason,
    /// The lease that ended, if one did.
    pub lease: Option<Lease>,
    /// How long it was held, from its grant to its end, both on the store's
    /// clock (never the instance's: the two may differ).
    pub held: Option<chrono::Duration>,
}

impl ReleaseOutcome {
    /// A lease ended (released or broken): the API's `released`.
    pub fn released(&self) -> bool {
        self.reason != ReleaseReason::NoLiveLease
    }

    /// Nothing live to release (L6): `released: false`, not an error.
    pub fn no_live_lease() -> Self {
        ReleaseOutcome { reason: ReleaseReason::NoLiveLease, lease: None, held: None }
    }

    /// `lease` ended `how` (released or broken) at `now`.
    pub fn ended(lease: Lease, how: LeaseEnd, now: Timestamp) -> Self {
        let reason = if how == LeaseEnd::Broken { ReleaseReason::Broken } else { ReleaseReason::Released };
        ReleaseOutcome { reason, held: Some(now - lease.acquired_at), lease: Some(lease) }
    }
}

/// Why a release answered as it did: the API's `reason` (docs/api.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseReason {
    Released,
    Broken,
    NoLiveLease,
}

impl ReleaseReason {
    pub const fn as_str(self) -> &'static str {
        match self {
            ReleaseReason::Released => "released",
            ReleaseReason::Broken => "broken",
            ReleaseReason::NoLiveLease => "no live lease",
        }
    }
}

fn note(n: &Option<String>) -> Result<(), StoreError> {
    match n {
        Some(n) => Ok(validate::text("note", n, 0, NOTE_MAX, Lines::Multi)?),
        None => Ok(()),
    }
}

fn session(s: &Option<String>) -> Result<(), StoreError> {
    match s {
        Some(s) => Ok(validate_name("session_id", s)?),
        None => Ok(()),
    }
}

impl ClaimRequest {
    /// The claim's TTL (L8) and cap (L19), or the field that is wrong.
    pub fn validate(&self, settings: &WorkspaceSettings) -> Result<Terms, StoreError> {
        validate_name("holder", &self.holder)?;
        session(&self.session_id)?;
        note(&self.note)?;
        let ttl = resolve_ttl(self.ttl_seconds, settings)?;
        let max_hold_seconds = lease::resolve_max_hold(self.max_hold_seconds, settings.max_hold_seconds, ttl)
            .map_err(|e| StoreError::invalid("max_hold_seconds", e.0))?;
        Ok(Terms { ttl, max_hold_seconds })
    }
}

fn handle_given(h: &LeaseHandle) -> Result<(), StoreError> {
    if h.is_empty() {
        return Err(StoreError::invalid("epoch", "the lease's epoch or lease_id is required"));
    }
    Ok(())
}

impl CompleteRequest {
    pub fn validate(&self) -> Result<(), StoreError> {
        validate_name("holder", &self.holder)?;
        handle_given(&self.handle)
    }
}

impl FailRequest {
    /// The quarantine threshold this failure is judged against.
    pub fn validate(&self, settings: &WorkspaceSettings) -> Result<u32, StoreError> {
        validate_name("holder", &self.holder)?;
        handle_given(&self.handle)?;
        note(&self.note)?;
        match self.max_failures {
            Some(n) if n == 0 || n > MAX_FAILURES_LIMIT => {
                Err(StoreError::invalid("max_failures", format!("must be from 1 to {MAX_FAILURES_LIMIT} (got {n})")))
            }
            Some(n) => Ok(n),
            None => Ok(settings.quarantine_after_failures),
        }
    }
}

impl RenewRequest {
    pub fn validate(&self, settings: &WorkspaceSettings) -> Result<Option<Ttl>, StoreError> {
        validate_name("holder", &self.holder)?;
        handle_given(&self.handle)?;
        note(&self.note)?;
        Ok(self.ttl_seconds.map(|s| resolve_ttl(Some(s), settings)).transpose()?)
    }
}

impl ReleaseRequest {
    pub fn validate(&self) -> Result<(), StoreError> {
        validate_name("holder", &self.holder)?;
        if let Some(r) = &self.reason {
            validate::text("reason", r, 1, REASON_MAX, Lines::Single)?;
        }
        if self.force && self.reason.is_none() {
            return Err(StoreError::invalid("reason", "breaking a lease needs a reason"));
        }
        Ok(())
    }
}

fn resolve_ttl(requested: Option<i64>, s: &WorkspaceSettings) -> Result<Ttl, InvalidTtl> {
    Ttl::resolve(requested, s.default_ttl_seconds, s.max_ttl_seconds)
}

/// Who asks, as the lease rules want it: claims carry a session id (L3);
/// the other operations name the lease by its handle instead.
impl ClaimRequest {
    pub fn claimant(&self) -> Claimant<'_> {
        Claimant { user_id: self.actor.user_id, holder: &self.holder, session_id: self.session_id.as_deref() }
    }

    /// Whether `other` asks for the same terms under another holder, so
    /// that one statement can grant both (docs/leases.md, "Claim-nexts made
    /// together").
    pub fn same_terms(&self, other: &ClaimRequest) -> bool {
        let ClaimRequest { actor, holder: _, session_id, ttl_seconds, note, refresh, max_hold_seconds } = self;
        *actor == other.actor
            && *session_id == other.session_id
            && *ttl_seconds == other.ttl_seconds
            && *note == other.note
            && *refresh == other.refresh
            && *max_hold_seconds == other.max_hold_seconds
    }
}

macro_rules! claimant_without_session {
    ($($req:ty),*) => {$(
        impl $req {
            pub fn claimant(&self) -> Claimant<'_> {
                Claimant { user_id: self.actor.user_id, holder: &self.holder, session_id: None }
            }
        }
    )*};
}

claimant_without_session!(RenewRequest, ReleaseRequest, CompleteRequest, FailRequest);
