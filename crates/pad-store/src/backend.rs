//! What a backend provides, and [`Store`] implemented once over it.
//!
//! A backend crate implements [`Backend`]: its clock, its write transaction
//! ([`Begin`], whose `Tx` provides the steps of `steps.rs`), and the
//! operations it answers alone, grouped as its files are — [`AccountOps`] in
//! its `accounts.rs`, [`ItemOps`] in `items.rs`, [`LeaseOps`] in `leases.rs`,
//! [`EventOps`] in `events.rs`, [`WebhookOps`] in `webhooks.rs`. Every
//! [`Backend`] is a [`Store`] by the one implementation below, which calls
//! the shared flows of `steps` or the backend's own operation. A new store
//! method is written in the trait, in a flow or an `*Ops` trait, and in each
//! dialect's primitive; no backend forwards anything. The documentation of
//! each operation is on [`Store`].

use async_trait::async_trait;
use pad_core::lease::LeaseHandle;
use pad_core::webhook::{CreateWebhook, Webhook, WebhookDelivery};
use pad_core::{
    Comment, Event, EventFilter, FrontierFilter, Item, ItemFilter, ItemPatch, ItemRef, Kind, Lease, Member, NewItem,
    Page, Principal, Role, Timestamp, TokenInfo, User, Version, Workspace,
};

use crate::shared;
use crate::steps::{self, Begin};
use crate::{
    Actor, AttemptResult, ClaimOutcome, ClaimRequest, ClaimedNext, CompleteRequest, DueDelivery, FailOutcome,
    FailRequest, NextClaim, ObservedExpiry, ReadySignals, ReleaseOutcome, ReleaseRequest, RenewRequest, Store,
    StoreResult, WebhookTarget,
};

/// A backend of pad: everything [`Store`] needs that depends on the dialect.
#[async_trait]
pub trait Backend: Begin + AccountOps + ItemOps + LeaseOps + EventOps + WebhookOps + Send + Sync + 'static {
    /// The store's clock (see [`Store::now`]).
    async fn now(&self) -> StoreResult<Timestamp>;

    /// See [`Store::ready_signals`].
    fn ready_signals(&self) -> Option<ReadySignals> {
        None
    }

    /// See [`Store::arm_ready_signals`].
    async fn arm_ready_signals(&self) -> bool {
        true
    }
}

/// Users, workspaces, members, tokens, sessions and kinds: reads, and the
/// writes of one statement.
#[async_trait]
pub trait AccountOps: Send + Sync {
    async fn has_users(&self) -> StoreResult<bool>;
    async fn list_workspaces(&self, user: Actor) -> StoreResult<Vec<(Workspace, Role)>>;
    async fn membership(&self, user: Actor, slug: &str) -> StoreResult<(Workspace, Role)>;
    async fn list_members(&self, ws: &Workspace) -> StoreResult<Vec<Member>>;
    async fn list_tokens(&self, ws: &Workspace, user: Actor) -> StoreResult<Vec<TokenInfo>>;
    async fn get_token(&self, id: i64) -> StoreResult<TokenInfo>;
    async fn revoke_token(&self, id: i64) -> StoreResult<()>;
    async fn authenticate(&self, hash: &str) -> StoreResult<Option<Principal>>;
    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>>;
    async fn create_session(&self, token_id: i64, hash: &str, ttl_seconds: i64) -> StoreResult<()>;
    async fn authenticate_session(&self, hash: &str) -> StoreResult<Option<Principal>>;
    async fn revoke_session(&self, hash: &str) -> StoreResult<bool>;
    async fn list_kinds(&self, ws: &Workspace) -> StoreResult<Vec<Kind>>;
    async fn add_kind(&self, ws: &Workspace, name: &str, prefix: &str) -> StoreResult<Kind>;
}

/// Item reads.
#[async_trait]
pub trait ItemOps: Send + Sync {
    async fn get_item(&self, ws: &Workspace, r: &ItemRef) -> StoreResult<Item>;
    async fn list_items(
        &self, ws: &Workspace, filter: &ItemFilter, limit: u32, cursor: Option<&str>,
    ) -> StoreResult<Page<Item>>;
    /// Up to `n` versions older than `before` (none: from the newest),
    /// newest first; [`shared::bounded_page`] cuts the page.
    async fn versions(&self, ws: &Workspace, r: &ItemRef, before: Option<i64>, n: u32) -> StoreResult<Vec<Version>>;
    /// Up to `n` comments after the comment `after` (0: from the first), oldest first.
    async fn comments(&self, ws: &Workspace, r: &ItemRef, after: i64, n: u32) -> StoreResult<Vec<Comment>>;
}

/// The lease operations each dialect writes as one statement or one short
/// transaction of its own, and the frontier.
#[async_trait]
pub trait LeaseOps: Begin {
    /// L1-L3: the shared flow, unless the dialect answers some claims
    /// before it opens a transaction (PostgreSQL: docs/leases.md, "A
    /// refusal does not queue").
    async fn claim(&self, ws: &Workspace, r: &ItemRef, req: &ClaimRequest) -> StoreResult<ClaimOutcome> {
        steps::claim(self, ws, r, req).await
    }
    async fn renew(&self, ws: &Workspace, r: &ItemRef, req: &RenewRequest) -> StoreResult<Lease>;
    async fn release(&self, ws: &Workspace, r: &ItemRef, req: &ReleaseRequest) -> StoreResult<ReleaseOutcome>;
    /// The shared flow unless the dialect has a faster one (PostgreSQL
    /// completes in one statement).
    async fn complete(&self, ws: &Workspace, r: &ItemRef, req: &CompleteRequest) -> StoreResult<Item> {
        steps::complete(self, ws, r, req).await
    }
    /// The complete, then its claim-next if it succeeded, unless the dialect
    /// makes both in one transaction (PostgreSQL: docs/leases.md, "A lease
    /// end's next claim rides with it"). So the fail and the release.
    async fn complete_then_claim(
        &self, ws: &Workspace, r: &ItemRef, req: &CompleteRequest, next: &NextClaim,
    ) -> StoreResult<(Item, ClaimedNext)> {
        let item = LeaseOps::complete(self, ws, r, req).await?;
        Ok((item, LeaseOps::claim_next_many(self, ws, &next.filter, &next.req, next.count).await))
    }
    async fn fail_then_claim(
        &self, ws: &Workspace, r: &ItemRef, req: &FailRequest, next: &NextClaim,
    ) -> StoreResult<(FailOutcome, ClaimedNext)> {
        let out = LeaseOps::fail(self, ws, r, req).await?;
        Ok((out, LeaseOps::claim_next_many(self, ws, &next.filter, &next.req, next.count).await))
    }
    async fn release_then_claim(
        &self, ws: &Workspace, r: &ItemRef, req: &ReleaseRequest, next: &NextClaim,
    ) -> StoreResult<(ReleaseOutcome, ClaimedNext)> {
        let out = LeaseOps::release(self, ws, r, req).await?;
        Ok((out, LeaseOps::claim_next_many(self, ws, &next.filter, &next.req, next.count).await))
    }
    /// The shared flow in a transaction of its own unless the dialect shares
    /// one between concurrent calls (PostgreSQL: docs/leases.md, "Lease
    /// calls that share a transaction").
    async fn fail(&self, ws: &Workspace, r: &ItemRef, req: &FailRequest) -> StoreResult<FailOutcome> {
        steps::fail(self, ws, r, req).await
    }
    /// As [`LeaseOps::fail`]: the shared flow, or the dialect's shared transaction.
    async fn claim_next_many(
        &self, ws: &Workspace, filter: &FrontierFilter, req: &ClaimRequest, count: u32,
    ) -> StoreResult<Vec<(Item, ClaimOutcome)>> {
        steps::claim_next_many(self, ws, filter, req, count).await
    }
    async fn frontier(&self, ws: &Workspace, filter: &FrontierFilter, limit: u32) -> StoreResult<Vec<Item>>;
    async fn live_leases(&self) -> StoreResult<Vec<(String, u64)>>;
}

/// Event reads.
#[async_trait]
pub trait EventOps: Send + Sync {
    async fn events_where(
        &self, ws: &Workspace, after: i64, limit: u32, filter: &EventFilter,
    ) -> StoreResult<Vec<Event>>;
}

/// The webhook subscriptions and their outbox (docs/webhooks.md).
#[async_trait]
pub trait WebhookOps: Send + Sync {
    async fn create_webhook(
        &self, ws: &Workspace, actor: Actor, new: &CreateWebhook, secret: &str,
    ) -> StoreResult<Webhook>;
    async fn list_webhooks(&self, ws: &Workspace) -> StoreResult<Vec<Webhook>>;
    async fn delete_webhook(&self, ws: &Workspace, id: i64) -> StoreResult<()>;
    async fn webhook_target(&self, ws: &Workspace, id: i64) -> StoreResult<WebhookTarget>;
    async fn webhook_deliveries(&self, ws: &Workspace, id: i64, limit: u32) -> StoreResult<Vec<WebhookDelivery>>;
    async fn claim_webhook_deliveries(&self, limit: u32, hold_seconds: i64) -> StoreResult<Vec<DueDelivery>>;
    async fn finish_webhook_delivery(&self, due: &DueDelivery, result: &AttemptResult) -> StoreResult<()>;
    async fn resume_webhook(&self, ws: &Workspace, id: i64) -> StoreResult<Webhook>;
    async fn trim_webhook_queues(&self, keep: i64) -> StoreResult<u64>;
    async fn log_webhook_test(&self, ws: &Workspace, id: i64, result: &AttemptResult) -> StoreResult<WebhookDelivery>;
}

/// The one implementation of [`Store`]: a shared flow of `steps`, or the
/// backend's own operation.
#[async_trait]
impl<B: Backend> Store for B {
    async fn now(&self) -> StoreResult<Timestamp> {
        Backend::now(self).await
    }
    async fn has_users(&self) -> StoreResult<bool> {
        AccountOps::has_users(self).await
    }
    async fn ensure_user(&self, email: &str) -> StoreResult<User> {
        steps::ensure_user(self, email).await
    }
    async fn create_workspace_charged_to(
        &self, slug: &str, name: &str, owner: Actor, charged_to: Actor,
    ) -> StoreResult<Workspace> {
        steps::create_workspace(self, slug, name, owner, charged_to).await
    }
    async fn list_workspaces(&self, user: Actor) -> StoreResult<Vec<(Workspace, Role)>> {
        AccountOps::list_workspaces(self, user).await
    }
    async fn membership(&self, user: Actor, slug: &str) -> StoreResult<(Workspace, Role)> {
        AccountOps::membership(self, user, slug).await
    }
    async fn set_member(&self, ws: &Workspace, email: &str, role: Role) -> StoreResult<Member> {
        steps::set_member(self, ws, email, role).await
    }
    async fn list_members(&self, ws: &Workspace) -> StoreResult<Vec<Member>> {
        AccountOps::list_members(self, ws).await
    }
    async fn remove_member(&self, ws: &Workspace, email: &str) -> StoreResult<()> {
        steps::remove_member(self, ws, email).await
    }
    async fn update_settings(
        &self, ws: &Workspace, patch: &pad_core::settings::SettingsPatch,
    ) -> StoreResult<Workspace> {
        steps::update_settings(self, ws, patch).await
    }
    async fn create_token(&self, user: Actor, name: &str, hash: &str) -> StoreResult<TokenInfo> {
        steps::insert_token(self, user, name, hash, None, user, user).await
    }
    #[allow(clippy::too_many_arguments)] // as on the trait
    async fn create_scoped_token(
        &self, user: Actor, name: &str, hash: &str, ws: &Workspace, role: Role, minted_by: Actor, charged_to: Actor,
    ) -> StoreResult<TokenInfo> {
        steps::insert_token(self, user, name, hash, Some((ws.id, role)), minted_by, charged_to).await
    }
    async fn list_tokens(&self, ws: &Workspace, user: Actor) -> StoreResult<Vec<TokenInfo>> {
        AccountOps::list_tokens(self, ws, user).await
    }
    async fn get_token(&self, id: i64) -> StoreResult<TokenInfo> {
        AccountOps::get_token(self, id).await
    }
    async fn revoke_token(&self, id: i64) -> StoreResult<()> {
        AccountOps::revoke_token(self, id).await
    }
    async fn authenticate(&self, hash: &str) -> StoreResult<Option<Principal>> {
        AccountOps::authenticate(self, hash).await
    }
    async fn user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        AccountOps::user_by_email(self, email).await
    }
    async fn bootstrap(&self, email: &str, slug: &str, name: &str, hash: &str) -> StoreResult<bool> {
        steps::bootstrap(self, email, slug, name, hash).await
    }
    async fn create_session(&self, token_id: i64, hash: &str, ttl_seconds: i64) -> StoreResult<()> {
        AccountOps::create_session(self, token_id, hash, ttl_seconds).await
    }
    async fn authenticate_session(&self, hash: &str) -> StoreResult<Option<Principal>> {
        AccountOps::authenticate_session(self, hash).await
    }
    async fn revoke_session(&self, hash: &str) -> StoreResult<bool> {
        AccountOps::revoke_session(self, hash).await
    }
    async fn list_kinds(&self, ws: &Workspace) -> StoreResult<Vec<Kind>> {
        AccountOps::list_kinds(self, ws).await
    }
    async fn add_kind(&self, ws: &Workspace, name: &str, prefix: &str) -> StoreResult<Kind> {
        AccountOps::add_kind(self, ws, name, prefix).await
    }
    async fn create_item(&self, ws: &Workspace, actor: Actor, new: &NewItem) -> StoreResult<Item> {
        steps::create_item(self, ws, actor, new).await
    }
    async fn get_item(&self, ws: &Workspace, r: &ItemRef) -> StoreResult<Item> {
        ItemOps::get_item(self, ws, r).await
    }
    async fn list_items(
        &self, ws: &Workspace, filter: &ItemFilter, limit: u32, cursor: Option<&str>,
    ) -> StoreResult<Page<Item>> {
        ItemOps::list_items(self, ws, filter, limit, cursor).await
    }
    async fn update_item(&self, ws: &Workspace, actor: Actor, r: &ItemRef, patch: &ItemPatch) -> StoreResult<Item> {
        steps::update_item(self, ws, actor, r, patch).await
    }
    async fn delete_item(&self, ws: &Workspace, actor: Actor, r: &ItemRef, fence: LeaseHandle) -> StoreResult<Item> {
        steps::set_deleted(self, ws, actor, r, fence, true).await
    }
    async fn restore_item(&self, ws: &Workspace, actor: Actor, r: &ItemRef) -> StoreResult<Item> {
        steps::set_deleted(self, ws, actor, r, LeaseHandle::default(), false).await
    }
    async fn requeue(&self, ws: &Workspace, actor: Actor, r: &ItemRef) -> StoreResult<Item> {
        steps::requeue(self, ws, actor, r).await
    }
    async fn history_page(
        &self, ws: &Workspace, r: &ItemRef, limit: u32, cursor: Option<&str>,
    ) -> StoreResult<Page<Version>> {
        let (before, limit) = shared::page_window(limit, cursor, pad_core::api::HISTORY_LIMIT_MAX)?;
        let rows = ItemOps::versions(self, ws, r, before, limit + 1).await?;
        Ok(shared::bounded_page(rows, limit, |v| (v.version, v.changes.to_string().len())))
    }
    async fn add_comment(&self, ws: &Workspace, actor: Actor, r: &ItemRef, body: &str) -> StoreResult<Comment> {
        steps::add_comment(self, ws, actor, r, body).await
    }
    async fn comments_page(
        &self, ws: &Workspace, r: &ItemRef, limit: u32, cursor: Option<&str>,
    ) -> StoreResult<Page<Comment>> {
        let (after, limit) = shared::page_window(limit, cursor, pad_core::api::COMMENTS_LIMIT_MAX)?;
        let rows = ItemOps::comments(self, ws, r, after.unwrap_or(0), limit + 1).await?;
        Ok(shared::bounded_page(rows, limit, |c| (c.id, c.body.len())))
    }
    async fn import(
        &self, ws: &Workspace, actor: Actor, req: &pad_core::api::ImportRequest, deadline: &crate::Deadline,
    ) -> StoreResult<pad_core::api::ImportResult> {
        steps::import(self, ws, actor, req, deadline).await
    }
    async fn claim(&self, ws: &Workspace, r: &ItemRef, req: &ClaimRequest) -> StoreResult<ClaimOutcome> {
        LeaseOps::claim(self, ws, r, req).await
    }
    async fn renew(&self, ws: &Workspace, r: &ItemRef, req: &RenewRequest) -> StoreResult<Lease> {
        LeaseOps::renew(self, ws, r, req).await
    }
    async fn release(&self, ws: &Workspace, r: &ItemRef, req: &ReleaseRequest) -> StoreResult<ReleaseOutcome> {
        LeaseOps::release(self, ws, r, req).await
    }
    async fn complete(&self, ws: &Workspace, r: &ItemRef, req: &CompleteRequest) -> StoreResult<Item> {
        LeaseOps::complete(self, ws, r, req).await
    }
    async fn complete_then_claim(
        &self, ws: &Workspace, r: &ItemRef, req: &CompleteRequest, next: &NextClaim,
    ) -> StoreResult<(Item, ClaimedNext)> {
        LeaseOps::complete_then_claim(self, ws, r, req, next).await
    }
    async fn fail_then_claim(
        &self, ws: &Workspace, r: &ItemRef, req: &FailRequest, next: &NextClaim,
    ) -> StoreResult<(FailOutcome, ClaimedNext)> {
        LeaseOps::fail_then_claim(self, ws, r, req, next).await
    }
    async fn release_then_claim(
        &self, ws: &Workspace, r: &ItemRef, req: &ReleaseRequest, next: &NextClaim,
    ) -> StoreResult<(ReleaseOutcome, ClaimedNext)> {
        LeaseOps::release_then_claim(self, ws, r, req, next).await
    }
    async fn fail(&self, ws: &Workspace, r: &ItemRef, req: &FailRequest) -> StoreResult<FailOutcome> {
        LeaseOps::fail(self, ws, r, req).await
    }
    async fn frontier(&self, ws: &Workspace, filter: &FrontierFilter, limit: u32) -> StoreResult<Vec<Item>> {
        LeaseOps::frontier(self, ws, filter, limit).await
    }
    async fn claim_next(
        &self, ws: &Workspace, filter: &FrontierFilter, req: &ClaimRequest,
    ) -> StoreResult<Option<(Item, ClaimOutcome)>> {
        Ok(LeaseOps::claim_next_many(self, ws, filter, req, 1).await?.pop())
    }
    async fn claim_next_many(
        &self, ws: &Workspace, filter: &FrontierFilter, req: &ClaimRequest, count: u32,
    ) -> StoreResult<Vec<(Item, ClaimOutcome)>> {
        LeaseOps::claim_next_many(self, ws, filter, req, count).await
    }
    fn ready_signals(&self) -> Option<ReadySignals> {
        Backend::ready_signals(self)
    }
    async fn arm_ready_signals(&self) -> bool {
        Backend::arm_ready_signals(self).await
    }
    async fn observe_expiries(&self) -> StoreResult<Vec<ObservedExpiry>> {
        steps::observe_expiries(self).await
    }
    async fn live_leases(&self) -> StoreResult<Vec<(String, u64)>> {
        LeaseOps::live_leases(self).await
    }
    async fn events_where(
        &self, ws: &Workspace, after: i64, limit: u32, filter: &EventFilter,
    ) -> StoreResult<Vec<Event>> {
        EventOps::events_where(self, ws, after, limit, filter).await
    }
    async fn create_webhook(
        &self, ws: &Workspace, actor: Actor, new: &CreateWebhook, secret: &str,
    ) -> StoreResult<Webhook> {
        WebhookOps::create_webhook(self, ws, actor, new, secret).await
    }
    async fn list_webhooks(&self, ws: &Workspace) -> StoreResult<Vec<Webhook>> {
        WebhookOps::list_webhooks(self, ws).await
    }
    async fn delete_webhook(&self, ws: &Workspace, id: i64) -> StoreResult<()> {
        WebhookOps::delete_webhook(self, ws, id).await
    }
    async fn webhook_target(&self, ws: &Workspace, id: i64) -> StoreResult<WebhookTarget> {
        WebhookOps::webhook_target(self, ws, id).await
    }
    async fn webhook_deliveries(&self, ws: &Workspace, id: i64, limit: u32) -> StoreResult<Vec<WebhookDelivery>> {
        WebhookOps::webhook_deliveries(self, ws, id, limit).await
    }
    async fn claim_webhook_deliveries(&self, limit: u32, hold_seconds: i64) -> StoreResult<Vec<DueDelivery>> {
        WebhookOps::claim_webhook_deliveries(self, limit, hold_seconds).await
    }
    async fn finish_webhook_delivery(&self, due: &DueDelivery, result: &AttemptResult) -> StoreResult<()> {
        WebhookOps::finish_webhook_delivery(self, due, result).await
    }
    async fn resume_webhook(&self, ws: &Workspace, id: i64) -> StoreResult<Webhook> {
        WebhookOps::resume_webhook(self, ws, id).await
    }
    async fn trim_webhook_queues(&self, keep: i64) -> StoreResult<u64> {
        WebhookOps::trim_webhook_queues(self, keep).await
    }
    async fn log_webhook_test(&self, ws: &Workspace, id: i64, result: &AttemptResult) -> StoreResult<WebhookDelivery> {
        WebhookOps::log_webhook_test(self, ws, id, result).await
    }
}
