//! One module per scenario. Each takes the fixture and the run's sizes and
//! returns its rows; none shares state with another (each uses workspaces
//! of its own).

pub mod batch;
pub mod contended;
pub mod cycle;
pub mod drain;
pub mod floor;
pub mod heartbeat;
pub mod instances;
pub mod pickup;
pub mod scale;
pub mod webhooks;

use pad_core::Lease;
use pad_core::api::{ClaimBody, ClaimNextBody, CompleteBody, ReleaseBody};
use pad_store::{Actor, ClaimRequest, ReleaseRequest};

/// Long enough that nothing expires during a measurement.
pub const TTL_SECONDS: i64 = 3600;

pub fn claim_body(holder: &str) -> ClaimBody {
    ClaimBody { holder: Some(holder.into()), ttl_seconds: Some(TTL_SECONDS.into()), ..ClaimBody::default() }
}

/// `holder`'s claim-next for one item, as a drain sends it.
pub fn claim_next_body(holder: &str) -> ClaimNextBody {
    ClaimNextBody { holder: Some(holder.into()), ttl_seconds: Some(TTL_SECONDS.into()), ..ClaimNextBody::default() }
}

/// The complete of `lease` that claims the next item with `claim` in the
/// same request (docs/api.md, "The next item in the same call").
pub fn done_and_next(lease: &Lease, claim: &ClaimNextBody) -> CompleteBody {
    CompleteBody {
        epoch: Some(lease.epoch),
        lease_id: Some(lease.lease_id),
        holder: Some(lease.holder.clone()),
        status: None,
        next: Some(claim.clone()),
    }
}

pub fn release_body(holder: &str) -> ReleaseBody {
    ReleaseBody { holder: Some(holder.into()), ..ReleaseBody::default() }
}

pub fn claim_request(actor: Actor, holder: &str) -> ClaimRequest {
    ClaimRequest {
        actor,
        holder: holder.into(),
        session_id: None,
        ttl_seconds: Some(TTL_SECONDS),
        note: None,
        refresh: true,
        max_hold_seconds: None,
    }
}

pub fn release_request(actor: Actor, holder: &str) -> ReleaseRequest {
    ReleaseRequest {
        actor,
        holder: holder.into(),
        handle: pad_core::lease::LeaseHandle::default(),
        force: false,
        reason: None,
        succeeded: false,
    }
}
