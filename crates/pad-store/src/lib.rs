//! The `Store` trait: everything pad persists, behind one interface that the
//! SQLite and Postgres backends implement, and the steps they share. The
//! conformance suite (crate `pad-test-support`) is written once against the
//! trait and run by every backend's tests.

mod backend;
pub mod clock;
mod deadline;
mod error;
mod requests;
pub mod rows;
pub mod shared;
mod webhooks;

pub mod steps;

use async_trait::async_trait;
use pad_core::lease::LeaseHandle;
use pad_core::{
    Comment, Event, EventFilter, FrontierFilter, Item, ItemFilter, ItemPatch, ItemRef, Kind, Lease, Member, NewItem,
    Page, Principal, Role, Timestamp, TokenInfo, User, Version, Workspace,
};

pub use backend::{AccountOps, Backend, EventOps, ItemOps, LeaseOps, WebhookOps};
pub use deadline::Deadline;
pub use error::{StoreError, StoreResult};
pub use requests::{
    ClaimOutcome, ClaimRequest, ClaimedNext, CompleteRequest, FailOutcome, FailRequest, MAX_FAILURES_LIMIT, NextClaim,
    ObservedExpiry, ReleaseOutcome, ReleaseReason, ReleaseRequest, RenewRequest,
};
pub use webhooks::{AttemptResult, DueDelivery, WebhookTarget, check_webhook_cap};

/// A subscription to [`Store::ready_signals`].
pub struct ReadySignals {
    /// One signal per change that may have made an item ready (or a lost
    /// connection, after which anything may have).
    pub rx: tokio::sync::broadcast::Receiver<()>,
    /// True when, as the subscription was taken, every change committed
    /// from then on was already signalled; false: call
    /// [`Store::arm_ready_signals`] before waiting.
    pub armed: bool,
}

/// The authenticated caller of a store operation: who wrote the history
/// version, comment or lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Actor {
    pub user_id: i64,
}

/// Every entry of a paged list: `page` answers the page after a cursor
/// (`None`: the first), until one has no `next_cursor`.
async fn all_pages<T, F, Fut>(mut page: F) -> StoreResult<Vec<T>>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = StoreResult<Page<T>>>,
{
    let (mut all, mut cursor) = (Vec::new(), None);
    loop {
        let p = page(cursor).await?;
        all.extend(p.items);
        match p.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(all),
        }
    }
}

/// One backend of pad. All times are the store's clock; callers never pass
/// `now`. Every text input is validated before anything is written, and every
/// operation either happens whole or not at all.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The store's clock, as used by its lease decisions.
    async fn now(&self) -> StoreResult<Timestamp>;

    /// True until the first user exists: the server bootstraps then.
    async fn has_users(&self) -> StoreResult<bool>;

    /// Returns the user with this email, creating it if needed.
    async fn ensure_user(&self, email: &str) -> StoreResult<User>;

    /// Creates a workspace with the default kinds, `owner` as its owner,
    /// its creation charged to `owner` itself.
    async fn create_workspace(&self, slug: &str, name: &str, owner: Actor) -> StoreResult<Workspace> {
        self.create_workspace_charged_to(slug, name, owner, owner).await
    }

    /// Creates a workspace with the default kinds, `owner` as its owner,
    /// its creation charged to `charged_to`: the account the creating
    /// request is charged to, recorded with the workspace for good. Its
    /// webhook deliveries count against that account whoever its members
    /// are later (docs/webhooks.md, "Isolation").
    async fn create_workspace_charged_to(
        &self, slug: &str, name: &str, owner: Actor, charged_to: Actor,
    ) -> StoreResult<Workspace>;

    /// The workspaces `user` is a member of, with its role in each.
    async fn list_workspaces(&self, user: Actor) -> StoreResult<Vec<(Workspace, Role)>>;

    /// The workspace and `user`'s role in it; `NotFound` if it does not
    /// exist or `user` is not a member, so non-members learn nothing.
    async fn membership(&self, user: Actor, slug: &str) -> StoreResult<(Workspace, Role)>;

    /// Adds a member (creating the user) or changes its role. Lowering a
    /// role revokes, in the same transaction, the tokens the member minted
    /// for others in `ws` (docs/api.md, "Tokens").
    async fn set_member(&self, ws: &Workspace, email: &str, role: Role) -> StoreResult<Member>;
    async fn list_members(&self, ws: &Workspace) -> StoreResult<Vec<Member>>;
    /// Removes a member (`NotFound` if not one; never the last owner) and
    /// revokes their tokens scoped to `ws` and those they minted there for
    /// others, in one transaction.
    async fn remove_member(&self, ws: &Workspace, email: &str) -> StoreResult<()>;

    /// Changes the workspace's lease settings (docs/api.md, "Workspace
    /// settings"), checked against the settings as stored at the write, and
    /// returns the workspace as it now is. Leases already granted keep their
    /// expiry.
    async fn update_settings(
        &self, ws: &Workspace, patch: &pad_core::settings::SettingsPatch,
    ) -> StoreResult<Workspace>;

    /// Stores an unscoped token (all of `user`'s workspaces) by its hash,
    /// charged to `user` itself (only its user mints one, and only with an
    /// unscoped token, which is charged to no one else); the
    /// secret itself never reaches the store. Refused past
    /// `TOKENS_PER_USER_MAX` live tokens of `user`. Who may mint what is
    /// `pad_core::authz::mint`'s to say, before this is called.
    async fn create_token(&self, user: Actor, name: &str, hash: &str) -> StoreResult<TokenInfo>;
    /// Like [`Store::create_token`], for a token that reaches `ws` only, with
    /// at most `role` there (docs/api.md, "Tokens"), minted by `minted_by`
    /// (`user` itself, or an owner minting for a member), and charged to
    /// `charged_to`: the account the minting token is charged to, so a chain
    /// of mints keeps charging its root (docs/api.md, "Limits").
    // Each argument is a column of the one row written; grouping them would
    // only move the list into a struct each caller fills the same way.
    #[allow(clippy::too_many_arguments)]
    async fn create_scoped_token(
        &self, user: Actor, name: &str, hash: &str, ws: &Workspace, role: Role, minted_by: Actor, charged_to: Actor,
    ) -> StoreResult<TokenInfo>;
    /// Live tokens scoped to `ws` (anyone's), and all live tokens of `user`;
    /// `pad_core::authz::token_visible` picks what a caller sees.
    async fn list_tokens(&self, ws: &Workspace, user: Actor) -> StoreResult<Vec<TokenInfo>>;
    /// The live token with this id.
    async fn get_token(&self, id: i64) -> StoreResult<TokenInfo>;
    async fn revoke_token(&self, id: i64) -> StoreResult<()>;
    /// Who a token hash belongs to, and its scope, if the token exists and is
    /// not revoked.
    async fn authenticate(&self, hash: &str) -> StoreResult<Option<Principal>>;
    /// The user with this email, if any (never creates one).
    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>>;

    /// The first start, in one transaction: on a store with no users,
    /// creates user `email`, workspace `slug` owned by it, and an unscoped
    /// token stored by `hash`; answers false (and writes nothing) when a user
    /// exists already. A crash anywhere inside leaves the store empty, so the
    /// next start bootstraps again (docs/reliability.md).
    async fn bootstrap(&self, email: &str, slug: &str, name: &str, hash: &str) -> StoreResult<bool>;

    /// A web session for the token `token_id`, stored by the hash of its
    /// random id, ending after `ttl_seconds` or on sign-out.
    async fn create_session(&self, token_id: i64, hash: &str, ttl_seconds: i64) -> StoreResult<()>;
    /// The session's principal (its token's), if the session is live and its
    /// token not revoked.
    async fn authenticate_session(&self, hash: &str) -> StoreResult<Option<Principal>>;
    /// Ends the session; whether it ended one (`false`: the hash names no
    /// session, or one already revoked), so a sign-out that changed nothing
    /// announces no change of authorization (docs/api.md, "Web sessions").
    async fn revoke_session(&self, hash: &str) -> StoreResult<bool>;

    async fn list_kinds(&self, ws: &Workspace) -> StoreResult<Vec<Kind>>;
    async fn add_kind(&self, ws: &Workspace, name: &str, prefix: &str) -> StoreResult<Kind>;

    async fn create_item(&self, ws: &Workspace, actor: Actor, new: &NewItem) -> StoreResult<Item>;
    /// Deleted items are found too. Refs are parsed once, by the caller (the
    /// server parses the path case-insensitively, `ItemRef::parse_field`).
    async fn get_item(&self, ws: &Workspace, item_ref: &ItemRef) -> StoreResult<Item>;
    /// Items in ref order; `cursor` is the `next_cursor` of the previous page.
    async fn list_items(
        &self, ws: &Workspace, filter: &ItemFilter, limit: u32, cursor: Option<&str>,
    ) -> StoreResult<Page<Item>>;
    /// A content change: one history version, `updated_at` moves on.
    async fn update_item(
        &self, ws: &Workspace, actor: Actor, item_ref: &ItemRef, patch: &ItemPatch,
    ) -> StoreResult<Item>;
    /// Soft delete, fenced by epoch and/or lease id when given (L10, L17).
    async fn delete_item(
        &self, ws: &Workspace, actor: Actor, item_ref: &ItemRef, fence: LeaseHandle,
    ) -> StoreResult<Item>;
    async fn restore_item(&self, ws: &Workspace, actor: Actor, item_ref: &ItemRef) -> StoreResult<Item>;

    /// Puts a quarantined item back in the queue (docs/leases.md, "Requeue"):
    /// removes `needs-human`, clears the expiry and failure counts and the
    /// failure backoff, in one step recorded in history. Leaves any lease
    /// alone; with nothing to clear it changes nothing.
    async fn requeue(&self, ws: &Workspace, actor: Actor, item_ref: &ItemRef) -> StoreResult<Item>;
    /// One page of history versions, newest first (docs/api.md, "Pages of
    /// history and comments"): at most `limit` (clamped to
    /// `1..=HISTORY_LIMIT_MAX`) and about `PAGE_BYTES_MAX` bytes of changes,
    /// older than `cursor`, the `next_cursor` of the page before.
    async fn history_page(
        &self, ws: &Workspace, item_ref: &ItemRef, limit: u32, cursor: Option<&str>,
    ) -> StoreResult<Page<Version>>;
    /// Every history version, newest first: the pages one after another,
    /// for tests and tools (the API answers one page at a time).
    async fn history(&self, ws: &Workspace, item_ref: &ItemRef) -> StoreResult<Vec<Version>> {
        let max = pad_core::api::HISTORY_LIMIT_MAX;
        all_pages(|cursor| async move { self.history_page(ws, item_ref, max, cursor.as_deref()).await }).await
    }
    async fn add_comment(&self, ws: &Workspace, actor: Actor, item_ref: &ItemRef, body: &str) -> StoreResult<Comment>;
    /// One page of comments, oldest first: at most `limit` (clamped to
    /// `1..=COMMENTS_LIMIT_MAX`) and about `PAGE_BYTES_MAX` bytes of bodies,
    /// newer than `cursor`.
    async fn comments_page(
        &self, ws: &Workspace, item_ref: &ItemRef, limit: u32, cursor: Option<&str>,
    ) -> StoreResult<Page<Comment>>;
    /// Every comment, oldest first, page after page (tests and tools).
    async fn list_comments(&self, ws: &Workspace, item_ref: &ItemRef) -> StoreResult<Vec<Comment>> {
        let max = pad_core::api::COMMENTS_LIMIT_MAX;
        all_pages(|cursor| async move { self.comments_page(ws, item_ref, max, cursor.as_deref()).await }).await
    }

    /// A whole import in one transaction (docs/api.md, "Import"): the kinds,
    /// items, links, statuses, comments and deletions of `req`, or nothing.
    /// A key `ws` has imported before writes nothing and answers that
    /// import's result with `replayed` set. Past `deadline` it rolls back
    /// and fails `Unavailable`: an import answered as late committed nothing.
    async fn import(
        &self, ws: &Workspace, actor: Actor, req: &pad_core::api::ImportRequest, deadline: &Deadline,
    ) -> StoreResult<pad_core::api::ImportResult>;

    /// L1-L3, L5, L7-L9.
    async fn claim(&self, ws: &Workspace, item_ref: &ItemRef, req: &ClaimRequest) -> StoreResult<ClaimOutcome>;
    /// L4.
    async fn renew(&self, ws: &Workspace, item_ref: &ItemRef, req: &RenewRequest) -> StoreResult<Lease>;
    /// L6, L7 (break with `force`, which the caller has authorized).
    async fn release(&self, ws: &Workspace, item_ref: &ItemRef, req: &ReleaseRequest) -> StoreResult<ReleaseOutcome>;
    /// L6/L7, then its next claim, as [`Store::complete_then_claim`].
    async fn release_then_claim(
        &self, ws: &Workspace, item_ref: &ItemRef, req: &ReleaseRequest, next: &NextClaim,
    ) -> StoreResult<(ReleaseOutcome, ClaimedNext)>;

    /// L15: sets the status and ends the caller's live lease in one
    /// transaction: one history version (if the status changed), then
    /// `item.updated` and `lease.released`; `last_lease` says `completed`.
    async fn complete(&self, ws: &Workspace, item_ref: &ItemRef, req: &CompleteRequest) -> StoreResult<Item>;

    /// L15, then the claim-next the complete carries, made only once the
    /// complete succeeded: the item as completed and the claim's own answer
    /// (its failure leaves the complete standing). A backend that shares
    /// transactions makes both in one.
    async fn complete_then_claim(
        &self, ws: &Workspace, item_ref: &ItemRef, req: &CompleteRequest, next: &NextClaim,
    ) -> StoreResult<(Item, ClaimedNext)>;

    /// L14: ends the caller's live lease as failed, counts the failure, keeps
    /// the note, sets `retry_at`, and quarantines at the threshold.
    async fn fail(&self, ws: &Workspace, item_ref: &ItemRef, req: &FailRequest) -> StoreResult<FailOutcome>;

    /// L14, then its next claim, as [`Store::complete_then_claim`].
    async fn fail_then_claim(
        &self, ws: &Workspace, item_ref: &ItemRef, req: &FailRequest, next: &NextClaim,
    ) -> StoreResult<(FailOutcome, ClaimedNext)>;

    /// L11: ready items (open, unblocked, no live lease), highest priority
    /// first, then oldest.
    async fn frontier(&self, ws: &Workspace, filter: &FrontierFilter, limit: u32) -> StoreResult<Vec<Item>>;

    /// L11: atomically picks the best ready item and claims it; `None` when
    /// nothing is ready. Concurrent callers never get the same item.
    async fn claim_next(
        &self, ws: &Workspace, filter: &FrontierFilter, req: &ClaimRequest,
    ) -> StoreResult<Option<(Item, ClaimOutcome)>>;

    /// L11 for a batch (docs/api.md, "Batches and long polls"): up to
    /// `count` of the best ready items, each under its own lease, epoch and
    /// `lease.claimed` event, best first; empty when nothing is ready.
    async fn claim_next_many(
        &self, ws: &Workspace, filter: &FrontierFilter, req: &ClaimRequest, count: u32,
    ) -> StoreResult<Vec<(Item, ClaimOutcome)>>;

    /// L4 for many leases (one heartbeat for a supervisor's jobs): each
    /// renewed or refused on its own, answers in the order asked.
    async fn renew_many(&self, ws: &Workspace, renewals: &[(ItemRef, RenewRequest)]) -> Vec<StoreResult<Lease>> {
        let calls = renewals.iter().map(|(r, req)| self.renew(ws, r, req));
        futures::future::join_all(calls).await
    }

    /// Signals a change another process committed that may have made an
    /// item ready, for long polls (docs/api.md, "Batches and long polls"):
    /// PostgreSQL's LISTEN/NOTIFY. `None` where this process commits every
    /// change itself (SQLite): the server's own signal covers those.
    fn ready_signals(&self) -> Option<ReadySignals> {
        None
    }

    /// Makes sure every change committed from now on, by any process,
    /// reaches [`ready_signals`](Store::ready_signals)' receivers; the
    /// database notifies only while some claim-next may wait (docs/api.md,
    /// "Wake-ups only while someone waits"). A waiter whose signals were not
    /// [`armed`](ReadySignals::armed) calls this before it first waits, then
    /// looks once more: a change committed before the call may have gone
    /// unsignalled. Gives up after a bounded time, answering false (the
    /// database is unreachable, or a long transaction keeps the arming
    /// waiting): the waiter's periodic look still finds the work.
    async fn arm_ready_signals(&self) -> bool {
        true
    }

    /// L5/L13: records every lease that has expired but not yet been
    /// observed: one `lease.expired` event each, the expiry count, and
    /// quarantine. Never changes what any read sees of a lease. Returns what
    /// it recorded, one entry per expired lease (for the lease metrics).
    async fn observe_expiries(&self) -> StoreResult<Vec<ObservedExpiry>>;

    /// The number of live (unexpired) leases in each workspace that has any,
    /// by workspace slug: the `pad_leases_live` gauge, read at scrape time.
    async fn live_leases(&self) -> StoreResult<Vec<(String, u64)>>;

    /// Events of `ws` with id greater than `after`, oldest first.
    async fn events_after(&self, ws: &Workspace, after: i64, limit: u32) -> StoreResult<Vec<Event>> {
        self.events_where(ws, after, limit, &EventFilter::default()).await
    }

    /// Like [`events_after`](Self::events_after), only the events `filter` matches.
    async fn events_where(
        &self, ws: &Workspace, after: i64, limit: u32, filter: &EventFilter,
    ) -> StoreResult<Vec<Event>>;

    // Webhooks (docs/webhooks.md). Every event insert also queues one outbox
    // row per matching subscription, in the event's transaction.

    /// Stores a subscription with its signing `secret` (kept in clear:
    /// signing needs it). Refused past `WEBHOOKS_PER_WORKSPACE_MAX`.
    async fn create_webhook(
        &self, ws: &Workspace, actor: Actor, new: &pad_core::webhook::CreateWebhook, secret: &str,
    ) -> StoreResult<pad_core::webhook::Webhook>;
    async fn list_webhooks(&self, ws: &Workspace) -> StoreResult<Vec<pad_core::webhook::Webhook>>;
    /// Deletes the subscription, its pending deliveries and its log.
    async fn delete_webhook(&self, ws: &Workspace, id: i64) -> StoreResult<()>;
    async fn webhook_target(&self, ws: &Workspace, id: i64) -> StoreResult<WebhookTarget>;
    /// The delivery log of one subscription, newest first.
    async fn webhook_deliveries(
        &self, ws: &Workspace, id: i64, limit: u32,
    ) -> StoreResult<Vec<pad_core::webhook::WebhookDelivery>>;
    /// Claims up to `limit` due outbox rows for `hold_seconds`, only the
    /// oldest pending event of each subscription (in-order delivery), none
    /// claimed by another instance.
    async fn claim_webhook_deliveries(&self, limit: u32, hold_seconds: i64) -> StoreResult<Vec<DueDelivery>>;
    /// Logs the attempt and applies `pad_core::webhook::after_attempt`:
    /// delivered or given up ends the row, else it waits for its retry; a
    /// given-up row pauses its subscription. A claim that ran out and passed
    /// on only logs.
    async fn finish_webhook_delivery(&self, due: &DueDelivery, result: &AttemptResult) -> StoreResult<()>;
    /// Clears a subscription's pause, so its queue is claimable again.
    async fn resume_webhook(&self, ws: &Workspace, id: i64) -> StoreResult<pad_core::webhook::Webhook>;
    /// Drops every subscription's queued deliveries older than its newest
    /// `keep` (none under a running claim), adds them to its `dropped`, and
    /// answers how many went.
    async fn trim_webhook_queues(&self, keep: i64) -> StoreResult<u64>;
    /// Logs a `webhook.test` delivery.
    async fn log_webhook_test(
        &self, ws: &Workspace, id: i64, result: &AttemptResult,
    ) -> StoreResult<pad_core::webhook::WebhookDelivery>;
}
