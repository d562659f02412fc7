//! The store side of webhooks (docs/webhooks.md): what the delivery worker
//! claims from the outbox and what it reports back.

use pad_core::Event;

/// The head of one subscription's outbox, claimed by one instance until
/// `hold` runs out (so a crashed instance's claim passes to another).
#[derive(Debug, Clone)]
pub struct DueDelivery {
    pub outbox_id: i64,
    /// Random per claim: the finish applies only while the claim is this one.
    pub claim: String,
    pub webhook_id: i64,
    pub workspace: String,
    pub url: String,
    pub secret: String,
    /// Attempts made before this one.
    pub attempts: u32,
    pub event: Event,
}

impl DueDelivery {
    /// The most deliveries of one account in flight at once, across the
    /// instances sharing the store (docs/webhooks.md, "Isolation"): an eighth
    /// of an instance's 256, so no account's receivers, hanging, can take
    /// more than that of the senders, whatever its number of workspaces.
    pub const IN_FLIGHT_PER_ACCOUNT: u32 = 32;
}

/// Where a subscription delivers, for a test delivery.
#[derive(Debug, Clone)]
pub struct WebhookTarget {
    pub id: i64,
    pub url: String,
    pub secret: String,
}

/// What one HTTP attempt got.
#[derive(Debug, Clone, Default)]
pub struct AttemptResult {
    pub status_code: Option<u16>,
    pub error: Option<String>,
    pub duration_ms: u64,
}

/// Refuses a subscription past the per-workspace cap (docs/webhooks.md).
pub fn check_webhook_cap(existing: i64) -> crate::StoreResult<()> {
    let max = pad_core::webhook::WEBHOOKS_PER_WORKSPACE_MAX;
    if existing >= max {
        return Err(crate::StoreError::invalid(
            "webhooks",
            format!("this workspace already has {existing} webhooks, the most it may hold ({max}); remove one first"),
        ));
    }
    Ok(())
}
